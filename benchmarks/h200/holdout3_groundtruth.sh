#!/usr/bin/env bash
# The third hold-out's ground truth on the H200 (tests/data/flaggems_h200/holdout3_2026-12-02/PROVENANCE.md), one
# device call, before zlops sees any night of it: (1) ROUNDS rounds of interleaved fresh `-m argmax` processes of
# A (master~2), C (master: argmax's non-inner kernel reads N/32 rows again) and C2 (origin/alt: N/64), order
# shuffled each round: which of C and C2 is ~3% slower on argmax (1024x1024x1024, 1), and is nothing else of
# argmax apart? (2) the kernel inventory's cost on real processes (issue 25): kernel_seed_cost.sh with P = B
# (master~1, README only) and T = C (one kernel changed), SEED_ROUNDS rounds of none / empty / seeded, whole subset.
# Everything lands in $OUT.   OUT=/tmp/out bash benchmarks/h200/holdout3_groundtruth.sh   (carry: .devcarry)
set -uo pipefail
ROUNDS=${ROUNDS:-6}; SEED_ROUNDS=${SEED_ROUNDS:-3}
GT_BUDGET_S=${GT_BUDGET_S:-285}; SEED_BUDGET_S=${SEED_BUDGET_S:-265}
H=$(dirname "$0")
export BUNDLE=flaggems_holdout3.bundle
OPS_ALL="max or argmax or sub"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
REVS="A=master~2 C=master C2=origin/alt" TAG=gt3_sel bash "$H/flaggems_holdout_device.sh" --ops "$OPS_ALL" \
  --phase "sel:argmax:$ROUNDS" --budget-s "$GT_BUDGET_S" --seed 43 --seq-start 1
echo "ground truth done at ${SECONDS} s"
REVS="P=master~1 T=master" TAG=s3 bash "$H/kernel_seed_cost.sh" --ops "$OPS_ALL" --rounds "$SEED_ROUNDS" \
  --budget-s "$SEED_BUDGET_S"
echo "seed cost done at ${SECONDS} s"
