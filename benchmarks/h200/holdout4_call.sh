#!/usr/bin/env bash
# The fourth FlagGems hold-out (min, argmin, div_tensor; issue 22), every night on ONE warm H200 machine.
# Call 1 (GT=1): the ground truth first: ROUNDS rounds of interleaved fresh `-m argmin` processes of A and the three
# candidate changes (origin/m8, origin/m32, origin/m64: argmin's wrapper launches its split-K kernel once more over
# the first 8/32/64 rows of [1024, 1024, 1024]), summarised to $OUT/gt4_summary.txt; then the nights as the time
# allows. Later calls (GT=0) go on with the nights from the same machine's home (/tmp/zh); CHANGE_REV names the
# candidate the ground truth chose (the live branch is rebuilt for it once: A and D SHAs do not change).
#   OUT=/tmp/out GT=1 CHANGE_REV=origin/m32 bash benchmarks/h200/holdout4_call.sh     (carry: .devcarry)
set -uo pipefail
H=$(cd "$(dirname "$0")" && pwd)
GT=${GT:-0}; ROUNDS=${ROUNDS:-3}; GT_BUDGET_S=${GT_BUDGET_S:-190}; CALL_S=${CALL_S:-585}
CHANGE_REV=${CHANGE_REV:-origin/m32}
export ZL_SLOWED_CASE="argmin/float16/(1024x1024x1024, 1)"
if [ "$GT" = 1 ]; then
  BUNDLE=flaggems_holdout4.bundle REVS="A=master~1 W8=origin/m8 W32=origin/m32 W64=origin/m64" TAG=gt4 \
    bash "$H/flaggems_holdout_device.sh" --ops "min or argmin or div_tensor" --phase "sel:argmin:$ROUNDS" \
    --budget-s "$GT_BUDGET_S" --seed 61 --seq-start 401
  tar xzf "$OUT/holdout_gt4.tar.gz" -C /tmp
  python3 "$H/holdout2_groundtruth_summary.py" /tmp/holdout_gt4 | tee "$OUT/gt4_summary.txt"
  echo "ground truth done at ${SECONDS} s"
fi
if [ -f /tmp/fg_live.change ] && [ "$(cat /tmp/fg_live.change)" != "$CHANGE_REV" ]; then rm -rf /tmp/fg_live; fi
echo "$CHANGE_REV" > /tmp/fg_live.change
OUT=$OUT TAG=v4 VARIANT=4 CHANGE_REV=$CHANGE_REV NIGHTS=${NIGHTS:-"A A D1 D1 D2 D2 W W W"} \
  BUDGET_S=$((CALL_S - SECONDS)) bash "$H/flaggems_holdout_nights.sh"
