#!/usr/bin/env bash
# The third hold-out, second part (the session after 2026-12-02's first): one device call that (1) measures the
# ground truth of the ~3% change first: ROUNDS rounds of interleaved fresh `-m argmax` processes of A (master~2),
# W1 (origin/w256) and W2 (origin/w384), order shuffled each round; (2) picks the candidate whose argmax
# (1024x1024x1024, 1) latency is apart from A's (every process) and whose change of medians is nearest +3%, and
# writes it to $OUT/change_rev.txt; (3) resumes the live nights from the recorded store (STATE, default the one
# committed after night 4) with that change as W: NIGHTS="A A D1 D2 D3 D4 W W W", as many as the call's time allows.
# Later calls: `VARIANT=3 CHANGE_REV=$(cat change_rev.txt) STATE=<the last home_v3a.tar.gz> ... flaggems_holdout_nights.sh`.
#   OUT=/tmp/out bash benchmarks/h200/holdout3_resume.sh        (carry: .devcarry: flaggems_holdout3.bundle, whl/, live/whl/)
set -uo pipefail
H=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-4}; GT_BUDGET_S=${GT_BUDGET_S:-190}; CALL_S=${CALL_S:-585}
STATE=${STATE:-$PWD/tests/data/flaggems_h200/holdout3_2026-12-02/live/state/home_v3a_after_night4.tar.gz}
export BUNDLE=flaggems_holdout3.bundle ZL_SLOWED_CASE="argmax/float16/(1024x1024x1024, 1)"
REVS="A=master~2 W1=origin/w256 W2=origin/w384" TAG=gt3_w bash "$H/flaggems_holdout_device.sh" \
  --ops "max or argmax or sub" --phase "sel:argmax:$ROUNDS" --budget-s "$GT_BUDGET_S" --seed 47 --seq-start 101
tar xzf "$OUT/holdout_gt3_w.tar.gz" -C /tmp
python3 "$H/holdout2_groundtruth_summary.py" /tmp/holdout_gt3_w | tee "$OUT/gt3_w_summary.txt"
python3 - "$OUT/gt3_w_summary.txt" > "$OUT/change_rev.txt" <<'PY'
import re, sys
rev = {"W1": "origin/w256", "W2": "origin/w384"}
best = None
for line in open(sys.argv[1]):
    m = re.match(r"argmax\s+1024x1024x1024\s+(W[12])\s.*\s([+-]\d+\.\d+)%(\s+apart)?", line)
    if m and m.group(3) and float(m.group(2)) > 1:
        change = float(m.group(2))
        if best is None or abs(change - 3) < abs(best[1] - 3):
            best = (m.group(1), change)
if best is None:
    sys.exit("neither candidate is slower than A on argmax (1024x1024x1024, 1) in every process")
print(rev[best[0]])
print(f"picked {best[0]} ({best[1]:+.2f}%)", file=sys.stderr)
PY
NIGHTS="A A D1 D2 D3 D4 W W W"
if [ ! -s "$OUT/change_rev.txt" ]; then   # the nights of unchanged code go on; no night of an unmeasured change
  echo "no change picked: only the nights of unchanged code run"; NIGHTS="A A D1 D2 D3 D4"; echo origin/w256 > "$OUT/change_rev.txt"
fi
echo "ground truth and pick done at ${SECONDS} s: $(cat "$OUT/change_rev.txt")"
OUT=$OUT TAG=v3a VARIANT=3 CHANGE_REV=$(cat "$OUT/change_rev.txt") STATE=$STATE NIGHTS="$NIGHTS" \
  BUDGET_S=$((CALL_S - SECONDS)) bash "$H/flaggems_holdout_nights.sh"
