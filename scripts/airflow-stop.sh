#!/usr/bin/env bash
# Stop `airflow standalone` and every process under it: the scheduler, dag-processor, api-server and
# triggerer, the LocalExecutor's workers, task supervisors and the task processes they put in process
# groups of their own. SIGTERM to the standalone alone leaves those orphaned (~38 processes, GiBs).
# Usage: scripts/airflow-stop.sh [PID]   (default: the pid in $AIRFLOW_HOME/standalone.pid, written by
#        scripts/airflow-standalone.sh; for one started by hand: pgrep -f 'airflow standalone')
set -euo pipefail
pid="${1:-}"
if [ -z "$pid" ]; then
  pidfile="${AIRFLOW_HOME:?set AIRFLOW_HOME, or pass the standalone pid}/standalone.pid"
  [ -f "$pidfile" ] || { echo "no $pidfile: pass the pid of airflow standalone" >&2; exit 1; }
  pid="$(cat "$pidfile")"
fi
case "$pid" in ''|*[!0-9]*) echo "not a pid: $pid" >&2; exit 1;; esac

tree() {  # the pid and all its descendants, parents first
  echo "$1"
  local child
  for child in $(pgrep -P "$1" || true); do tree "$child"; done
}
started() {  # the start time of a running process (/proc/PID/stat field 22; tells a reused pid apart),
  local s     # nothing for a gone or zombie (exited, not yet reaped) one
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  s=${s##*) }
  set -- $s
  [ "$1" = Z ] || echo "${20}"
}
# one snapshot before any signal: a child whose parent died is re-parented and out of reach of a later walk
snapshot=""
for p in $(tree "$pid"); do snapshot="$snapshot $p:$(started "$p")"; done
alive() {  # the snapshot's processes still running (same pid, same start time)
  local entry out=""
  for entry in $snapshot; do
    [ -n "${entry#*:}" ] && [ "$(started "${entry%%:*}")" = "${entry#*:}" ] && out="$out ${entry%%:*}"
  done
  echo "$out"
}
pids=$(alive)
[ -n "$(alive)" ] || { echo "no process $pid: nothing to stop"; rm -f "${pidfile:-}"; exit 0; }
echo "stopping airflow standalone $pid and $(( $(wc -w <<<"$pids") - 1 )) processes under it"
kill -TERM $pids 2>/dev/null || true
for _ in $(seq 1 "${AIRFLOW_STOP_WAIT_S:-20}"); do
  [ -z "$(alive)" ] && break
  sleep 1
done
left=$(alive)
if [ -n "$left" ]; then
  echo "still running after SIGTERM:$left; sending SIGKILL"
  kill -KILL $left 2>/dev/null || true
  sleep 1
fi
left=$(alive)
[ -z "$left" ] || { echo "could not stop:$left" >&2; exit 1; }
rm -f "${pidfile:-}"
echo "stopped"
