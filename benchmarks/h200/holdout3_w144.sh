#!/usr/bin/env bash
# The third hold-out, the change's nights (session of 2026-12-02, second): W1 (NROWS 256) measured +5.74% and W2
# (384) +8.46% on argmax (1024x1024x1024, 1), so neither is the ~3% case; W3 = origin/w144 (the same wrapper
# patch over a [64, 144, 1024] prefix; 144 is the smallest NROWS above 128 that keeps the kernel's heuristics)
# is measured first here: ROUNDS rounds of interleaved fresh `-m argmax` processes of A and W3, then, if W3 is
# slower than A in every process, the live nights resume from STATE (the home returned after night 6) with W3 as
# the change W: NIGHTS="A A D1 D2 D3 D4 W W W", as many as the call's time allows.
#   OUT=/tmp/out STATE=.devcarry/home_v3a.tar.gz bash benchmarks/h200/holdout3_w144.sh   (carry: .devcarry)
set -uo pipefail
H=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-4}; GT_BUDGET_S=${GT_BUDGET_S:-140}; CALL_S=${CALL_S:-585}
export BUNDLE=flaggems_holdout3.bundle ZL_SLOWED_CASE="argmax/float16/(1024x1024x1024, 1)"
REVS="A=master~2 W3=origin/w144" TAG=gt3_w144 bash "$H/flaggems_holdout_device.sh" \
  --ops "max or argmax or sub" --phase "sel:argmax:$ROUNDS" --budget-s "$GT_BUDGET_S" --seed 53 --seq-start 201
tar xzf "$OUT/holdout_gt3_w144.tar.gz" -C /tmp
python3 "$H/holdout2_groundtruth_summary.py" /tmp/holdout_gt3_w144 | tee "$OUT/gt3_w144_summary.txt"
if ! grep -Eq '^argmax +1024x1024x1024 +W3 .*\+[0-9.]+% +apart' "$OUT/gt3_w144_summary.txt"; then
  echo "W3 is not slower than A in every process: no night of it runs"; exit 0
fi
echo "ground truth done at ${SECONDS} s"
rm -rf /tmp/fg_live   # a warm machine may hold the live branch built with another change
OUT=$OUT TAG=v3a VARIANT=3 CHANGE_REV=origin/w144 STATE=${STATE:?the home after night 6} NIGHTS="A A D1 D2 D3 D4 W W W" \
  BUDGET_S=$((CALL_S - SECONDS)) bash "$H/flaggems_holdout_nights.sh"
