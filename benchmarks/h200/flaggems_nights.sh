#!/usr/bin/env bash
# Issue 11's acceptance on a real H200: a trimmed FlagGems (commits A = as fetched, B = README only,
# C = abs does its work twice; tests/data/flaggems_h200/PROVENANCE.md) through `zlops nightly` with the
# production default judge, nights A, A, A, B, C, C-again. Reports, verdicts and the A/B's cost land in
# $OUT/flaggems_nights.tar.gz.
#
#   OUT=/tmp/out bash benchmarks/h200/flaggems_nights.sh
#
# Inputs, beside this checkout (the device tool sends the checkout; carry the rest in .devcarry/):
#   $CARRY/flaggems.bundle  git bundle of the trimmed upstream, branch master = C, master~1 = B, master~2 = A
#   $CARRY/whl/*.whl        zlops' dependencies the image lacks (pydantic, pydantic-core, annotated-types,
#                           typing-inspection, typing-extensions, sqlalchemy, alembic, mako, slack-sdk, uv);
#                           sqlalchemy is also what flag_gems needs beyond torch and triton
# Knobs: NIGHTS="A A A B C C" (labels, in order), BUDGET_S (570), CARRY (default $PWD/.devcarry), ZLOPS_CONFIG_EXTRA (YAML
# lines appended to the config, e.g. "noise: {ab_pairs: 0}" to skip the A/B while checking the setup).
set -uo pipefail
REPO=$PWD
OUT=${OUT:-/tmp/zlops-flaggems}
CARRY=${CARRY:-$REPO/.devcarry}
NIGHTS=${NIGHTS:-"A A A B C C"}
BUDGET_S=${BUDGET_S:-570}   # the device tool's 600 s per command: no night starts after BUDGET_S - 90 s
E=$OUT/flaggems_nights
HOME_Z=/tmp/zf
UP=/tmp/flaggems_upstream
mkdir -p "$E"
# keep NVLink multicast off in every process started from here (the device notes say why)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
if [ -d "$CARRY/whl" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$CARRY"/whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$REPO PATH=/tmp/site/bin:$PATH
fi
rm -rf "$UP" "$HOME_Z"
git clone -q "$CARRY/flaggems.bundle" "$UP" || exit 1
declare -A SHA=([A]=$(git -C "$UP" rev-parse master~2) [B]=$(git -C "$UP" rev-parse master~1)
                [C]=$(git -C "$UP" rev-parse master))
git -C "$UP" log --format='%H %s' > "$E/upstream_log.txt"
cat > "$E/zlops.yaml" <<YAML
home: $HOME_Z
pools:
  h200: {backend: cuda, devices: [0]}
suites:
  flaggems:
    repo: $UP
    branch: master
    install: []
    system_site_packages: true
    # FlagGems' own harness; it writes result_<argv>.log into its working directory (results_glob)
    command: ["python", "-m", "pytest", "{worktree}/benchmark", "-m", "{cases}", "--level", "core",
              "--dtypes", "float16", "--record", "log", "--warmup", "100", "--iter", "100",
              "-p", "no:cacheprovider", "-q", "-s"]
    select: {token: "^([^/]+)/", join: " or ", every: "abs or neg or exp or relu or sum"}
    results_glob: "result*.log"
    results_name: flaggems_record.log
    format: flaggems-record
    pools: [h200]
    rounds: 1
    timeout_s: 600
    env: {PYTHONPATH: "/tmp/site"}
${ZLOPS_CONFIG_EXTRA:-}
YAML
python3 -m zlops.cli config check "$E/zlops.yaml" > "$E/config_check.txt" 2>&1 || { cat "$E/config_check.txt"; exit 1; }
(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv;
 python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)') > "$E/env.txt" 2>&1
n=0
for label in $NIGHTS; do
  if [ "$SECONDS" -gt "$((BUDGET_S - 90))" ]; then  # leave time for the verdicts and the tarball
    echo "budget: ${SECONDS} s of ${BUDGET_S} s spent, night $n ($label) and later not run" | tee -a "$E/walls.txt"
    break
  fi
  start=$SECONDS
  python3 -m zlops.cli --plain nightly --config "$E/zlops.yaml" --sha "${SHA[$label]}" --run-id "night-$n-$label" \
    > "$E/night$n-$label.txt" 2>&1 || echo "night $n exit $?" >> "$E/night$n-$label.txt"
  echo "night $n ($label) wall $((SECONDS - start)) s" | tee -a "$E/night$n-$label.txt" "$E/walls.txt"
  grep -E "Overall" "$E/night$n-$label.txt" | tail -1
  RUN=$(ls -d "$HOME_Z"/artifacts/flaggems/*night-$n-$label* 2>/dev/null | head -1)
  [ -n "$RUN" ] && cp "$RUN/report.txt" "$E/night$n-$label.report.txt" 2>/dev/null
  n=$((n+1))
done
python3 - "$E/zlops.yaml" > "$E/verdicts.json" <<'PY'
import json, sys
from pathlib import Path
from zlops.config.settings import load_config
from zlops.steps.context import open_store
config = load_config(sys.argv[1])
store = open_store(config)
runs = sorted(store.list_runs(suite="flaggems"), key=lambda r: r.started_at)
out = {}
for run in runs:
    rows = store.comparisons(run.run_key)
    loud = {f"{c.case} {c.metric}": [c.verdict.value, c.judgement.change_pct, c.judgement.threshold_pct, c.judgement.note]
            for c in rows if c.verdict.value not in ("unchanged",)}
    ab = sorted((config.artifacts_dir / "flaggems").glob(f"*{run.run_key.split(':')[-1]}*/ab/h200/*"))
    ab_s = 0.0
    for d in ab:
        try:
            ab_s += json.loads((d / "timing.json").read_text())["duration_s"] or 0.0
        except (OSError, ValueError, KeyError):
            pass
    argv = [json.loads((d / "manifest.json").read_text())["argv"] for d in ab[:1]]
    out[run.run_key] = {"accepted": run.accepted, "verdict_counts": {}, "loud": loud, "ab_runs": len(ab),
                        "ab_seconds": round(ab_s, 1), "ab_argv_example": argv}
    for c in rows:
        out[run.run_key]["verdict_counts"][c.verdict.value] = out[run.run_key]["verdict_counts"].get(c.verdict.value, 0) + 1
print(json.dumps(out, indent=1, default=str))
PY
ident=$(ls "$HOME_Z"/artifacts/flaggems/*/h200/0/run_identity.json 2>/dev/null | head -1)
[ -n "$ident" ] && cp "$ident" "$E/run_identity.json"
tar czf "$OUT/flaggems_nights.tar.gz" -C "$OUT" flaggems_nights && rm -rf "$E"
