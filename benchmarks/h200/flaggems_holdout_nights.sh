#!/usr/bin/env bash
# Issue 22's acceptance on a real H200, live: the real `zlops nightly` (production defaults: judge noise, the
# sequential A/B with its cost model, the budget floor, three outcomes) over the hold-out FlagGems upstream of
# tests/data/flaggems_h200/holdout_2026-12-01/PROVENANCE.md: nights of unchanged code, then the slowed commit S.
#
#   OUT=/tmp/out TAG=c1 NIGHTS="A A D1 D2 D3 D4 S S" BUDGET_S=590 bash benchmarks/h200/flaggems_holdout_nights.sh
#
# Commits: A = master~2 of the bundle, D1 = master~1 (B: README only), D2.. = further README-only commits on D1,
# S = the bundle's S change (master) cherry-picked onto the last D; author and dates fixed, so the SHAs are the
# same on every machine. One `zlops nightly` per night on one cuda pool (device 0), FlagGems run as the recording
# ran it (`--level core --dtypes float16 --warmup 100 --iter 100`, ~21 s a process).
# After every night the evidence (made in $WORK) is re-written to $OUT/nights_$TAG.tar.gz (per-night CLI output, report, run meta
# and verdicts as JSON: flaggems_holdout_nights_summary.py) and zlops' home (store and artifacts, worktrees and
# environments left out) to $OUT/home_$TAG.tar.gz, so a call stopped at its limit still returns what it did.
# Resumable: a later call goes on from $HOME_Z if the machine is the same, else from STATE=<a home_*.tar.gz>.
#
# Inputs (CARRY, default ./.devcarry): flaggems_holdout.bundle, whl/*.whl and live/whl/*.whl (sqlalchemy for
# flag_gems; pydantic, pydantic-core, annotated-types, typing-inspection, typing-extensions, alembic, mako and uv
# for zlops: the image has the rest).
# Knobs: NIGHTS; BUDGET_S (seconds this call may take); NIGHT_S (a night without A/B, 40) and AB_RESERVE_S (what
# a night's A/B may spend, 300 = the budget floor): no night starts unless NIGHT_S + AB_RESERVE_S are left (NIGHT_S
# alone while every night so far ran this same commit: no A/B can run);
# INERT_PATHS (the suite's inert_paths as YAML list items, e.g. '"*.md"': a README night then runs no A/B against
# the commit before it; empty = none, every differing commit gets its A/B);
# ZLOPS_CONFIG_EXTRA (YAML appended to the config; empty = the production defaults); UNCHANGED_EXTRA (YAML appended
# for the nights of unchanged code only, e.g. "noise: {ab_pairs: 0}": their A/Bs cost ~250 s a night on this suite);
# DRY_UPSTREAM (a CPU dry run: a tests/flaggems_holdout.HoldoutReplay upstream, its shas in $DRY_UPSTREAM/shas.txt).
# VARIANT=2: the second hold-out (flaggems_holdout2.bundle: sum, prod, mul; A = master~3, D1 = master~2, S =
# master~1 and K = master cherry-picked onto the last D, in that order), with `kernels: triton` on the suite
# (issue 25's inventory and attribution); K nights run with the production config like S nights.
# VARIANT=3: the third hold-out (flaggems_holdout3.bundle: max, argmax, sub; A = master~2, D1 = master~1, the
# change = CHANGE_REV cherry-picked onto the last D, labelled W (or C): origin/w256 or origin/w384 (argmax's
# wrapper launches its kernel once more: the ~3% slowdown), master (argmax's kernel changed: -46%, the ground
# truth); `kernels: triton`; the change's nights run with the production config like S nights.
# VARIANT=4: the fourth hold-out (flaggems_holdout4.bundle: min, argmin, div_tensor; A = master~1, D1 = master,
# the change = CHANGE_REV (origin/m8, origin/m32 or origin/m64: argmin's wrapper launches its split-K kernel once
# more over the first 8/32/64 rows) cherry-picked onto the last D, labelled W; `kernels: triton`.
# VARIANT=5: the fifth hold-out (flaggems_holdout5.bundle: amin, any, maximum; A = master~1, D1 = master, the
# change = CHANGE_REV (origin/r65536, origin/r131072 or origin/r196608: amin's wrapper launches its kernel once more
# over the first ROWS rows of [1024, 1024, 1024]) cherry-picked onto the last D, labelled W; `kernels: triton`.
# VARIANT=6: the sixth hold-out (flaggems_holdout6.bundle: var_mean, all, cumsum; A = master~1, D1 = master, the
# change = CHANGE_REV (origin/r262144 ... origin/r655360: var_mean's wrapper launches its Welford kernel once more
# over the first ROWS rows of [1024, 1024, 1024]) cherry-picked onto the last D, labelled W; `kernels: triton`.
# VARIANT=7: the seventh hold-out (flaggems_holdout7.bundle: cos, gelu, softmax; A = master~1, D1 = master, the
# change = CHANGE_REV (origin/k16 ... origin/k64: cos of at most 65536 elements evaluates a TERMS-term series, one
# dependent FMA a term) cherry-picked onto the last D, labelled W; `kernels: triton`) with FlagGems' graph timer:
# MODE (FlagGems' --mode, appended to the suite's command; empty = FlagGems' default, kernel) is cudagraph here.
# ZLOPS_SRC (default: this checkout): the zlops source tree the nights import (PYTHONPATH) and name in env.txt,
# e.g. a fixed commit's `git archive` carried in .devcarry (hold-out 6: the device copies a working tree that
# others edit); its ZLOPS_COMMIT file, if any, names the commit. The zlops commands then run with ZLOPS_SRC as their
# working directory: `python -m` puts the working directory first on sys.path, so run from this checkout's root
# they would import the checkout's zlops, not ZLOPS_SRC's.
set -uo pipefail
REPO=$PWD
HERE=$(cd "$(dirname "$0")" && pwd)
CARRY=${CARRY:-$REPO/.devcarry}
OUT=${OUT:-/tmp/zlops-holdout-nights}
TAG=${TAG:-c1}
NIGHTS=${NIGHTS:-"A A D1 D2 D3 D4 S S"}
BUDGET_S=${BUDGET_S:-590}
NIGHT_S=${NIGHT_S:-40}
AB_RESERVE_S=${AB_RESERVE_S:-300}
HOME_Z=${HOME_Z:-/tmp/zh}
VARIANT=${VARIANT:-1}
ZLOPS_SRC=${ZLOPS_SRC:-$REPO}
MODE_GIVEN=${MODE+1}; MODE=${MODE-}
if [ "$VARIANT" = 7 ]; then
  BUNDLE=flaggems_holdout7.bundle; OPS_EXPR="cos or gelu or softmax"; BASE_REV=master; KERNELS_LINE="kernels: triton"
  [ -n "$MODE_GIVEN" ] || MODE=cudagraph
elif [ "$VARIANT" = 6 ]; then
  BUNDLE=flaggems_holdout6.bundle; OPS_EXPR="var_mean or all or cumsum"; BASE_REV=master; KERNELS_LINE="kernels: triton"
elif [ "$VARIANT" = 5 ]; then
  BUNDLE=flaggems_holdout5.bundle; OPS_EXPR="amin or any or maximum"; BASE_REV=master; KERNELS_LINE="kernels: triton"
elif [ "$VARIANT" = 4 ]; then
  BUNDLE=flaggems_holdout4.bundle; OPS_EXPR="min or argmin or div_tensor"; BASE_REV=master; KERNELS_LINE="kernels: triton"
elif [ "$VARIANT" = 3 ]; then
  BUNDLE=flaggems_holdout3.bundle; OPS_EXPR="max or argmax or sub"; BASE_REV=master~1; KERNELS_LINE="kernels: triton"
elif [ "$VARIANT" = 2 ]; then
  BUNDLE=flaggems_holdout2.bundle; OPS_EXPR="sum or prod or mul"; BASE_REV=master~2; KERNELS_LINE="kernels: triton"
else
  BUNDLE=flaggems_holdout.bundle; OPS_EXPR="mean or amax or add"; BASE_REV=master~1; KERNELS_LINE=""
fi
UP=${DRY_UPSTREAM:-/tmp/fg_live}
W=${WORK:-/tmp/zlops-nights}   # the evidence is made here and only its tarballs go to $OUT (8 files come back)
E=$W/nights_$TAG
mkdir -p "$E" "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
if [ -z "${DRY_UPSTREAM:-}" ]; then
  ls "$CARRY"/whl/*.whl "$CARRY"/live/whl/*.whl > /dev/null || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$CARRY"/whl/*.whl "$CARRY"/live/whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$ZLOPS_SRC PATH=/tmp/site/bin:$PATH
fi
PY=${PY:-python3}
echo "setup: wheels in ${SECONDS} s"
# STATE is read after the cd below: made absolute here (hold-out 7's second call, given the relative
# .devcarry/state/home_v7.tar.gz, did not find it from ZLOPS_SRC and began again from night 1)
[ -n "${STATE:-}" ] && [ -f "$STATE" ] && STATE=$(cd "$(dirname "$STATE")" && pwd)/$(basename "$STATE")
if [ "$ZLOPS_SRC" != "$REPO" ]; then
  cd "$ZLOPS_SRC" || exit 1
  $PY -c 'import sys, zlops; assert zlops.__file__.startswith(sys.argv[1]), zlops.__file__' "$ZLOPS_SRC" || exit 1
fi

declare -A SHA
if [ -n "${DRY_UPSTREAM:-}" ]; then
  while read -r name sha; do SHA[$name]=$sha; done < "$UP/shas.txt"
  COMMAND='["python", "{worktree}/replay_holdout.py", "{worktree}/benchmark", "-m", "{cases}", "--level", "core", "--dtypes", "float16", "--record", "log"]'
  BACKEND=cpu BRANCH=main ENV_LINE="env: {HOLDOUT_REPLAY_STATE: \"$HOME_Z/replay-state\", HOLDOUT_REPLAY_TIME_SCALE: \"${DRY_SCALE:-0.05}\"}"
else
  if ! git -C "$UP" rev-parse -q --verify live > /dev/null 2>&1; then
    rm -rf "$UP"
    git clone -q "$CARRY/$BUNDLE" "$UP" || exit 1
    ndocs=$(tr ' ' '\n' <<< "$NIGHTS" | sed -n 's/^D\([0-9]*\)$/\1/p' | sort -n | tail -1)
    (cd "$UP" && export GIT_AUTHOR_NAME=zlops GIT_AUTHOR_EMAIL=zlops@example.com GIT_COMMITTER_NAME=zlops \
        GIT_COMMITTER_EMAIL=zlops@example.com GIT_AUTHOR_DATE=2026-12-01T12:00:00Z GIT_COMMITTER_DATE=2026-12-01T12:00:00Z &&
     git checkout -q -b live $BASE_REV &&
     for k in $(seq 2 "${ndocs:-1}"); do
       printf 'Nightly tracking note %s (docs only).\n' "$k" >> README.md && git commit -q -am "README: note $k (docs only)"
     done &&
     if [ "$VARIANT" = 2 ]; then git cherry-pick master~1 master > /dev/null
     elif [ "$VARIANT" -ge 3 ]; then git cherry-pick "${CHANGE_REV:-master}" > /dev/null
     else git cherry-pick master > /dev/null; fi) || exit 1
  fi
  if [ "$VARIANT" -ge 3 ]; then
    SHA[W]=$(git -C "$UP" rev-parse live); SHA[C]=${SHA[W]}; LAST_D=live~1
  elif [ "$VARIANT" = 2 ]; then
    SHA[K]=$(git -C "$UP" rev-parse live); SHA[S]=$(git -C "$UP" rev-parse live~1); LAST_D=live~2
  else
    SHA[S]=$(git -C "$UP" rev-parse live); LAST_D=live~1
  fi
  SHA[A]=$(git -C "$UP" rev-parse $BASE_REV~1); SHA[D1]=$(git -C "$UP" rev-parse $BASE_REV)
  k=2
  for d in $(git -C "$UP" rev-list --reverse $BASE_REV..$LAST_D); do SHA[D$k]=$d; k=$((k+1)); done
  COMMAND='["python", "-m", "pytest", "{worktree}/benchmark", "-m", "{cases}", "--level", "core", "--dtypes", "float16", "--record", "log", "--warmup", "100", "--iter", "100", "-p", "no:cacheprovider", "-q", "-s"]'
  [ -n "$MODE" ] && COMMAND="${COMMAND%]}, \"--mode\", \"$MODE\"]"
  BACKEND=cuda BRANCH=live ENV_LINE='env: {PYTHONPATH: "/tmp/site"}'
fi
git -C "$UP" log --format='%H %s' "$BRANCH" > "$E/upstream_log.txt"
for name in "${!SHA[@]}"; do echo "$name ${SHA[$name]}"; done | sort > "$E/shas.txt"

if [ ! -d "$HOME_Z" ] && [ -n "${STATE:-}" ] && [ -f "$STATE" ]; then
  mkdir -p "$HOME_Z" && tar xzf "$STATE" -C "$HOME_Z" && echo "resumed the store from $STATE"
fi
mkdir -p "$HOME_Z"
CFG=$HOME_Z/zlops.yaml
cat > "$CFG" <<YAML
home: $HOME_Z
pools:
  h200: {backend: $BACKEND, devices: [0]}
suites:
  flaggems:
    repo: $UP
    branch: $BRANCH
    install: []
    system_site_packages: true
    command: $COMMAND
    select: {token: "^([^/]+)/", join: " or ", every: "$OPS_EXPR"}
    results_glob: "result*.log"
    results_name: flaggems_record.log
    partial_exit_codes: [1]
    inert_paths: [${INERT_PATHS:-}]
    format: flaggems-record
    pools: [h200]
    rounds: 1
    timeout_s: 600
    $ENV_LINE
    $KERNELS_LINE
${ZLOPS_CONFIG_EXTRA:-}
YAML
cp "$CFG" "$E/zlops.yaml"
CFG_U=$CFG   # the config of the nights of unchanged code (labels other than S): the same unless UNCHANGED_EXTRA
if [ -n "${UNCHANGED_EXTRA:-}" ]; then
  CFG_U=$HOME_Z/zlops_unchanged.yaml
  { cat "$CFG"; echo "$UNCHANGED_EXTRA"; } > "$CFG_U"
  cp "$CFG_U" "$E/zlops_unchanged.yaml"
fi
$PY -m zlops.cli config check "$CFG" > "$E/config_check.txt" 2>&1 || { cat "$E/config_check.txt"; exit 1; }
{ date -u
  if [ -f "$ZLOPS_SRC/ZLOPS_COMMIT" ]; then echo "zlops $(cat "$ZLOPS_SRC/ZLOPS_COMMIT") (ZLOPS_SRC=$ZLOPS_SRC)"
  else git -C "$REPO" log --oneline -1 2>/dev/null || echo "zlops: (no git)"; fi
  if [ -z "${DRY_UPSTREAM:-}" ]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,temperature.gpu,power.draw --format=csv
    $PY -c 'import sys, torch, triton, sqlalchemy, pydantic; print(sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "sqlalchemy", sqlalchemy.__version__, "pydantic", pydantic.__version__)'
    nproc; uname -r
  fi; } > "$E/env.txt" 2>&1
touch "$HOME_Z/nights.tsv"

save() {   # the evidence and the home, re-written after every night
  $PY "$HERE/flaggems_holdout_nights_summary.py" "$CFG" "$HOME_Z/nights.tsv" "$E/json" \
    > "$E/verdicts.txt" 2>&1 || echo "summary failed: $(tail -3 "$E/verdicts.txt")"
  cp "$HOME_Z/nights.tsv" "$E/nights.tsv"
  tar czf "$OUT/nights_$TAG.tar.gz" -C "$W" "nights_$TAG"
  # Triton's IR files (ptx, llir, ttir, ttgir, source: ~1 MB a variant, an autotuned kernel has dozens) stay
  # behind, the cubins and metadata the inventories hash come back; a home still over the 16 MiB a returned
  # file may have comes back without any kernel cache (home_$TAG.nocache.tar.gz)
  tar czf "$OUT/home_$TAG.tar.gz" -C "$HOME_Z" --exclude=./worktrees --exclude=./envs --exclude='*/worktree' \
    --exclude='*.ptx' --exclude='*.llir' --exclude='*.ttir' --exclude='*.ttgir' --exclude='*.source' . 2>/dev/null
  if [ "$(stat -c %s "$OUT/home_$TAG.tar.gz")" -gt 15728640 ]; then
    rm -f "$OUT/home_$TAG.tar.gz"
    tar czf "$OUT/home_$TAG.nocache.tar.gz" -C "$HOME_Z" --exclude=./worktrees --exclude=./envs --exclude='*/worktree' \
      --exclude='triton_cache' --exclude='kernel_cache' --exclude='triton_seed' . 2>/dev/null
  fi
}

n=$(wc -l < "$HOME_Z/nights.tsv")
i=0
for label in $NIGHTS; do
  i=$((i+1))
  [ "$i" -le "$n" ] && continue          # run by an earlier call
  left=$((BUDGET_S - SECONDS))
  sha=${SHA[$label]:-}
  # only the very first nights of one commit can skip the A/B reserve: a suspect carried over from an earlier
  # commit keeps that commit as its baseline, so a second night of D1 A/Bs D1 against A again (hold-out 4, night 4)
  reserve=$AB_RESERVE_S
  [ -n "$sha" ] && [ -z "$(cut -f3 "$HOME_Z/nights.tsv" | grep -v "^$sha\$")" ] && reserve=0
  if [ "$left" -lt $((NIGHT_S + reserve)) ]; then
    echo "time: ${SECONDS} s of ${BUDGET_S} s spent; night $i ($label) and later left for a next call" | tee -a "$E/walls.txt"
    break
  fi
  [ -n "$sha" ] || { echo "no commit for night label $label"; break; }
  start=$SECONDS
  rid="n$i-$label"
  timeout --signal=INT --kill-after=20 $((left - 25)) \
    $PY -m zlops.cli --plain nightly --config "$(case $label in S|K|C|W) echo "$CFG";; *) echo "$CFG_U";; esac)" --sha "$sha" \
    --run-id "$rid" > "$E/night$i-$label.txt" 2>&1
  rc=$?
  wall=$((SECONDS - start))
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$label" "$sha" "$rid" "$wall" "$rc" >> "$HOME_Z/nights.tsv"
  echo "night $i ($label) exit $rc wall $wall s (at ${SECONDS} s)" | tee -a "$E/walls.txt"
  RUN=$(ls -d "$HOME_Z"/artifacts/flaggems/*"$rid"* 2>/dev/null | head -1)
  [ -n "$RUN" ] && cp "$RUN/report.txt" "$E/night$i-$label.report.txt" 2>/dev/null
  save
  sed -n "/^night $i /,/^night $((i+1)) /p" "$E/verdicts.txt" | grep -v "^night $((i+1)) " | cut -c1-300
done
(date -u; [ -z "${DRY_UPSTREAM:-}" ] && nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv) >> "$E/env_end.txt" 2>&1
save
echo "done at ${SECONDS} s"
