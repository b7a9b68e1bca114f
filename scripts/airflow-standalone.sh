#!/usr/bin/env bash
# Start `airflow standalone` in the background: its output goes to $AIRFLOW_HOME/standalone.log and its
# pid to $AIRFLOW_HOME/standalone.pid, which scripts/airflow-stop.sh reads to stop every process it started.
# Needs the environment of the README's Airflow quick start (PATH with .venv/bin, AIRFLOW_HOME, ...).
set -euo pipefail
: "${AIRFLOW_HOME:?set AIRFLOW_HOME first (see the README: Airflow quick start)}"
pidfile="$AIRFLOW_HOME/standalone.pid"
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  echo "airflow standalone already runs (pid $(cat "$pidfile")); stop it with scripts/airflow-stop.sh" >&2
  exit 1
fi
mkdir -p "$AIRFLOW_HOME"
setsid airflow standalone >"$AIRFLOW_HOME/standalone.log" 2>&1 </dev/null &
echo $! >"$pidfile"
echo "airflow standalone started (pid $!): UI on http://localhost:${AIRFLOW__API__PORT:-8080} in ~15-30 s (longer on a busy machine); log $AIRFLOW_HOME/standalone.log"
echo "stop it with: bash scripts/airflow-stop.sh"
