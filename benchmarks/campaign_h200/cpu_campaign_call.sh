#!/bin/bash
# One device call of the CPU gloo campaign under the production defaults (issue 22), on a many-core host:
#   NIGHTS="1 2 3" bash benchmarks/campaign_h200/cpu_campaign_call.sh      # first call: a fresh home
#   NIGHTS="4 5 6" bash benchmarks/campaign_h200/cpu_campaign_call.sh      # next calls, same warm machine
#   RESTORE=.devcarry/campaign_h200x2_n3.tar.gz NIGHTS="5 6" bash ...      # next call, a fresh machine
# run_nights.py --backend cpu --defaults --contention-gate (the config a user writes from docs/campaigns.md,
# gate on), 1 MiB all-reduce, P {1, 2}, 4 nights of unchanged code then 2 of the 2x slowdown. A night starts
# only while the call has STOP_AFTER seconds used or fewer (a night and its A/B took up to ~410 s on 2 cores);
# the rest waits for the next call. zlops' dependencies come from the cp312 wheels in $WHEELS (no network).
set -u
PY=${PY:-python3}
WHEELS=${WHEELS:-.devcarry/whl}
if [ ! -d /tmp/site/pydantic ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHEELS"/*.whl || exit 3
fi
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
home=${ZG:-/tmp/zg}/home
# a fresh machine (the warm one was released): resume from the newest tarball of an earlier call, carried in
if [ ! -f "$home/zlops.json" ] && [ -n "${RESTORE:-}" ]; then
  mkdir -p "${ZG:-/tmp/zg}" && tar -xzf "$RESTORE" -C "${ZG:-/tmp/zg}" || exit 4
  echo "restored $home and the upstream from $RESTORE"
fi
[ -f .devcarry/zlops_commit.txt ] && cp .devcarry/zlops_commit.txt "$OUT/" 2>/dev/null
mkdir -p "$OUT"
{ nproc; uptime; $PY -c 'import torch, sys; print(sys.version.split()[0], torch.__version__, torch.distributed.is_gloo_available())'
  lscpu | grep -E "Model name|^CPU\(s\)|Thread|Socket"; } > "$OUT/env_$(date +%H%M%S).txt" 2>&1
start=$(date +%s)
rc=0
for n in ${NIGHTS:-1 2 3 4 5 6}; do
  used=$(( $(date +%s) - start ))
  if [ "$used" -gt "${STOP_AFTER:-150}" ]; then echo "night $n and later left for the next call ($used s used)"; break; fi
  if [ "$n" = 1 ]; then args="--nights 1"; else args="--nights $n --resume"; fi
  set -o pipefail
  timeout $(( ${LIMIT:-585} - used )) $PY benchmarks/campaign_h200/run_nights.py --backend cpu --defaults \
    --contention-gate --sizes 1048576 --unchanged 4 --slowed 2 --home "$home" --out "$OUT" $args 2>&1 \
    | tee -a "$OUT/nights.log"
  rc=$?
  set +o pipefail
  echo "night $n rc=$rc at $(( $(date +%s) - start )) s" | tee -a "$OUT/walls.txt"
  [ "$rc" = 0 ] || break
done
# keep only the newest home tarball (each has every earlier night)
ls -t "$OUT"/campaign_h200x2_n*.tar.gz 2>/dev/null | tail -n +2 | xargs -r rm -f
cp "$home/nights.json" "$OUT/" 2>/dev/null
exit $rc
