#!/usr/bin/env bash
# The device call of tests/data/flaggems_h200/graph_timer_2026-12-06/ (carry: .devcarry/flaggems_holdout6.bundle,
# .devcarry/whl): hold-out 6's A (master~1 of the bundle), fresh whole-subset processes K G K G K G
# (graph_timer_device.py), everything in $OUT/graph_timer.tar.gz.
#   OUT=/tmp/out PAIRS=3 BUDGET_S=270 bash benchmarks/h200/graph_timer_call.sh
set -uo pipefail
H=$(cd "$(dirname "$0")" && pwd)
export CARRY=${CARRY:-$PWD/.devcarry}
R=$OUT/graph_timer
mkdir -p "$R"
BUNDLE=flaggems_holdout6.bundle REVS="A=master~1"
. "$H/holdout_checkouts.sh"
holdout_checkouts fg || { echo "checkout failed"; exit 1; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'
  nproc; uname -r; } > "$R/env.txt" 2>&1
cat "$R/env.txt"
python3 "$H/graph_timer_device.py" --checkout /tmp/fg_A --out "$R" --pairs "${PAIRS:-3}" \
  --budget-s "${BUDGET_S:-270}" 2>&1 | tee "$R/driver.txt"
(date -u; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv) >> "$R/env_end.txt" 2>&1
rm -rf "$R/.plugin"
tar czf "$OUT/graph_timer.tar.gz" -C "$OUT" graph_timer && rm -rf "$R"
ls -la "$OUT"
