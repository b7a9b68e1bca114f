#!/usr/bin/env bash
# The second hold-out's ground truth on the H200 (tests/data/flaggems_h200/holdout2_2026-12-02/PROVENANCE.md), one
# device call: (1) the first process of A, S and K, each in an empty Triton cache of its own, and the kernels
# they compiled (holdout_kernels.py: S must compile exactly A's, K must differ in sum's non-inner kernel);
# (2) PAIRS interleaved whole-subset pairs of A and S (is S ~3% slower on sum's 1024^3 shape, and only there?);
# (3) KPAIRS `-m sum` pairs of S and K (what K's kernel change costs). Everything lands in $OUT.
#   OUT=/tmp/out bash benchmarks/h200/holdout2_groundtruth.sh        (carry: .devcarry, see flaggems_holdout_device.sh)
set -uo pipefail
REPO=$PWD
PAIRS=${PAIRS:-6}; KPAIRS=${KPAIRS:-3}
D=benchmarks/h200/flaggems_holdout_device.sh
export BUNDLE=flaggems_holdout2.bundle OPS_ALL="sum or prod or mul"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
REVS="A=master~3 S=master~1 K=master" TAG=gt_cold bash $D --ops "$OPS_ALL" --phase cold --cold-cache-dir /tmp/cold \
  --budget-s 150 --seed 31 --seq-start 1
(cd /tmp && PYTHONPATH=/tmp/site:$REPO python3 "$REPO/benchmarks/h200/holdout_kernels.py" /tmp/cold A S K) \
  > "$OUT/kernels_cold.txt" 2>&1
grep -E -- '->|^  [-+]| kernels$' "$OUT/kernels_cold.txt"
REVS="A=master~3 S=master~1" TAG=gt_pairs bash $D --ops "$OPS_ALL" --phase "pairs:$PAIRS" --budget-s 330 --seed 32 \
  --seq-start 11
REVS="S=master~1 K=master" TAG=gt_k bash $D --ops "$OPS_ALL" --phase "sel:sum:$KPAIRS" --budget-s 110 --seed 33 \
  --seq-start 41
echo "ground truth done at ${SECONDS} s"
