#!/usr/bin/env bash
# The sixth FlagGems hold-out (var_mean, all, cumsum; tests/data/flaggems_h200/holdout6_2026-12-06/PROVENANCE.md) on
# an H200 through the device tool, in the style of holdout5_call.sh.
# Call 1 (GT=1): the ground truth first: one cold whole-subset process of A (does every op run? what does a process
# cost?), then ROUNDS rounds of interleaved fresh `-m var_mean` processes of A and the candidate changes of GT_REVS
# (default r262144, r393216, r524288: var_mean's wrapper launches its Welford kernel once more over the first
# 256k/384k/512k of the 2**20 rows of [1024, 1024, 1024] reduced over dim 1), summarised (the sel processes only) to
# $OUT/gt6_summary.txt; the candidate whose median change of that shape is nearest +3% is written to
# $OUT/gt6_pick.txt. NIGHTS="" (the default with GT=1) stops there.
# Later calls (GT=0) run the nights of flaggems_holdout_nights.sh (VARIANT=6, TAG=v6) with CHANGE_REV (the pick),
# resuming from the same machine's home (/tmp/zh) or, on a fresh machine, from STATE (a home_v6.tar.gz that an
# earlier call returned, copied into .devcarry/). ZLOPS_SRC: the zlops tree the nights import: a fixed commit's
# `git archive` in .devcarry/zlops_src (with its ZLOPS_COMMIT file), never the working tree the device copies.
#   OUT=/tmp/out GT=1 bash benchmarks/h200/holdout6_call.sh                                         (carry: .devcarry)
#   OUT=/tmp/out CHANGE_REV=origin/r393216 STATE=.devcarry/state/home_v6.tar.gz NIGHTS="A A A A A D1 W W W" \
#     bash benchmarks/h200/holdout6_call.sh
set -uo pipefail
H=$(cd "$(dirname "$0")" && pwd)
REPO=$PWD
export CARRY=${CARRY:-$REPO/.devcarry}
GT=${GT:-0}; ROUNDS=${ROUNDS:-2}; GT_BUDGET_S=${GT_BUDGET_S:-230}; CALL_S=${CALL_S:-585}
export ZL_SLOWED_CASE="var_mean/float16/(1024x1024x1024, 1)"
if [ "$GT" = 1 ]; then
  one=(--phase "one:A:var_mean or all or cumsum"); [ "${GT_ONE:-1}" = 1 ] || one=()   # GT_ONE=0: no cold process
  BUNDLE=flaggems_holdout6.bundle \
  REVS=${GT_REVS:-"A=master~1 W256k=origin/r262144 W384k=origin/r393216 W512k=origin/r524288"} TAG=gt6 \
    bash "$H/flaggems_holdout_device.sh" --ops "var_mean or all or cumsum" \
    "${one[@]}" --phase "sel:var_mean:$ROUNDS" \
    --budget-s "$GT_BUDGET_S" --seed 73 --seq-start 601
  tar xzf "$OUT/holdout_gt6.tar.gz" -C /tmp
  mkdir -p /tmp/gt6_sel && cp /tmp/holdout_gt6/*_sel_*.log /tmp/gt6_sel/
  python3 "$H/holdout2_groundtruth_summary.py" /tmp/gt6_sel | tee "$OUT/gt6_summary.txt"
  echo "--- the cold whole-subset process (A):" >> "$OUT/gt6_summary.txt"
  mkdir -p /tmp/gt6_one && cp /tmp/holdout_gt6/*_one_*.log /tmp/gt6_one/ 2>/dev/null && \
    python3 "$H/holdout2_groundtruth_summary.py" /tmp/gt6_one >> "$OUT/gt6_summary.txt"
  cat /tmp/holdout_gt6/processes.tsv >> "$OUT/gt6_summary.txt"
  pick=$(awk '$1 == "var_mean" && $2 == "1024x1024x1024" && $3 ~ /^W/ {
           c = ""; for (i = 4; i <= NF; i++) if ($i ~ /%$/) c = $i
           if (c == "") next; sub(/%/, "", c); d = c - 3; if (d < 0) d = -d
           if (best == "" || d < bd) { best = $3; bd = d } } END { print best }' "$OUT/gt6_summary.txt")
  case $pick in W256k) rev=origin/r262144;; W384k) rev=origin/r393216;; W512k) rev=origin/r524288;;
    W640k) rev=origin/r655360;; *) rev="";; esac
  echo "ground truth done at ${SECONDS} s; change picked: ${pick:-none} -> ${rev:-none}" | tee -a "$OUT/gt6_summary.txt"
  echo "$rev" > "$OUT/gt6_pick.txt"; echo "$rev" > /tmp/fg_live.pick
fi
NIGHTS=${NIGHTS-$([ "$GT" = 1 ] && echo "" || echo "A A A A A D1 W W W")}
[ -n "$NIGHTS" ] || exit 0
CHANGE_REV=${CHANGE_REV:-$(cat /tmp/fg_live.pick 2>/dev/null)}
[ -n "$CHANGE_REV" ] || { echo "no CHANGE_REV"; exit 1; }
if [ -f /tmp/fg_live.change ] && [ "$(cat /tmp/fg_live.change)" != "$CHANGE_REV" ]; then rm -rf /tmp/fg_live; fi
echo "$CHANGE_REV" > /tmp/fg_live.change
ZLOPS_SRC=${ZLOPS_SRC:-$CARRY/zlops_src}
[ -f "$ZLOPS_SRC/zlops/__init__.py" ] || { echo "no zlops source in $ZLOPS_SRC"; exit 1; }
echo "zlops: $(cat "$ZLOPS_SRC/ZLOPS_COMMIT" 2>/dev/null) from $ZLOPS_SRC"
OUT=$OUT TAG=v6 VARIANT=6 CHANGE_REV=$CHANGE_REV NIGHTS=$NIGHTS ZLOPS_SRC=$ZLOPS_SRC STATE=${STATE:-} \
  BUDGET_S=$((CALL_S - SECONDS)) bash "$H/flaggems_holdout_nights.sh"
