#!/usr/bin/env bash
# The noise judge end to end on a real GPU: 7 quiet nights of suites/torch_ops, then a night whose
# commit makes add_16M do 5% and softmax_8192 3% more work; the suspects are confirmed by a same-device
# interleaved A/B (7 pairs) before the report. Evidence in $OUT/noise_nightly.tar.gz.
#   OUT=/tmp/out bash benchmarks/h200/noise_nightly.sh
set -uo pipefail
REPO=$PWD
OUT=${OUT:-/tmp/zlops-noise}
E=$OUT/noise_nightly
mkdir -p "$E"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$REPO PATH=/tmp/site/bin:$PATH
fi
UP=/tmp/torch_ops_noise
rm -rf "$UP" /tmp/zn && cp -r suites/torch_ops "$UP" && cd "$UP" || exit 1
g() { git -c user.name=zlops -c user.email=zlops@example.com "$@"; }
g init -q -b main && g add -A && g commit -qm "torch_ops" && SHAS=$(git rev-parse HEAD)
for i in 1 2 3 4 5 6; do echo "quiet night $i" >> NOTES.md; g add -A; g commit -qm "docs $i"; SHAS="$SHAS $(git rev-parse HEAD)"; done
echo "add_16M=0.05,softmax_8192=0.03" > inject.txt && g add -A && g commit -qm "add +5%, softmax +3% work" && SHAS="$SHAS $(git rev-parse HEAD)"
if [ -n "${QUICK:-}" ]; then  # two nights only: the baseline and the injected commit (A/B on night 2)
  SHAS="$(echo $SHAS | cut -d' ' -f1) $(echo $SHAS | awk '{print $NF}')"
fi
cd "$REPO"
cat > /tmp/zn.yaml <<YAML
home: /tmp/zn
pools:
  h200: {backend: cuda, devices: [0]}
suites:
  torch-ops:
    repo: $UP
    install: []
    command: ["python", "bench.py", "--out", "{results}", "--device", "{device}", "--rounds", "{rounds}"]
    format: zlops-json
    pools: [h200]
    rounds: 5
    system_site_packages: true
    env: {PYTHONPATH: "$REPO"}
judge: noise
noise: {ab_pairs: 7, ab_budget: 10}
YAML
cp /tmp/zn.yaml "$E/zlops.yaml"
n=0
for sha in $SHAS; do
  n=$((n+1))
  start=$SECONDS
  python3 -m zlops.cli --plain nightly --config /tmp/zn.yaml --sha "$sha" --run-id "night-$n" \
    > "$E/night$n.txt" 2>&1 || echo "night $n exit $?" >> "$E/night$n.txt"
  echo "night $n wall $((SECONDS - start)) s" | tee -a "$E/night$n.txt"
  grep -E "Overall" "$E/night$n.txt" | tail -1
done
LAST=$(ls -d /tmp/zn/artifacts/torch-ops/*night-$n-*)
cp "$LAST/report.txt" "$LAST/report.md" "$E/" 2>/dev/null
ls "$LAST/ab/h200" > "$E/ab_runs.txt" 2>&1
python3 - > "$E/verdicts.json" <<'PY'
import json
from zlops.config.settings import load_config
from zlops.steps.context import open_store
store = open_store(load_config("/tmp/zn.yaml"))
runs = {r.run_key: r for r in store.list_runs()}
out = {}
for key in sorted(runs, key=lambda k: runs[k].started_at):
    out[key] = {c.case: [c.verdict.value, c.judgement.change_pct, c.judgement.threshold_pct, c.judgement.note]
                for c in store.comparisons(key)}
print(json.dumps(out, indent=1, default=str))
PY
tar czf "$OUT/noise_nightly.tar.gz" -C "$OUT" noise_nightly && rm -rf "$E"
