#!/usr/bin/env bash
# Prove zlops' CUDA path on a real NVIDIA GPU and collect the evidence (docs/evidence/h200.md).
# Run from the repository root on the GPU host, with zlops' wheels in .whl/ (see docs/evidence/h200.md):
#   OUT=/tmp/out bash benchmarks/h200/nightly_evidence.sh
# Writes $OUT/evidence.tar.gz: zlops devices, zlops telemetry, two nightlies of suites/torch_ops
# (the second commit makes three cases do known extra work), their reports, manifests, telemetry.
set -uo pipefail
REPO=$PWD
OUT=${OUT:-/tmp/zlops-evidence}
E=$OUT/evidence
mkdir -p "$E"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$REPO PATH=/tmp/site/bin:$PATH
fi
zl() { python3 -m zlops.cli --plain "$@"; }
{ date -u; nvidia-smi; python3 -c "import torch, sys; print(sys.version); print(torch.__version__, torch.cuda.get_device_name(0))"; } > "$E/env.txt" 2>&1
zl devices --backend cuda > "$E/devices.txt" 2>&1
zl devices --backend cuda --json > "$E/devices.json" 2>&1
zl telemetry --backend cuda --interval-ms 200 --duration-s 3 --out "$E/telemetry_idle.csv" > "$E/telemetry_idle.txt" 2>&1

UP=/tmp/torch_ops_upstream
rm -rf "$UP" /tmp/zh && cp -r suites/torch_ops "$UP" && cd "$UP" || exit 1
g() { git -c user.name=zlops -c user.email=zlops@example.com "$@"; }
g init -q -b main && g add -A && g commit -qm "torch_ops: 12 cases" && C1=$(git rev-parse HEAD)
echo "add_16M=0.10,softmax_8192=0.05,layernorm_8192=0.03" > inject.txt
g add -A && g commit -qm "add +10%, softmax +5%, layernorm +3% work" && C2=$(git rev-parse HEAD)
cd "$REPO"
cat > /tmp/zh.yaml <<YAML
home: /tmp/zh
pools:
  h200: {backend: cuda, devices: [0]}
suites:
  torch-ops:
    repo: $UP
    branch: main
    install: []
    command: ["python", "bench.py", "--out", "{results}", "--device", "{device}", "--rounds", "{rounds}"]
    format: zlops-json
    pools: [h200]
    rounds: 7
    timeout_s: 900
    system_site_packages: true
    env: {PYTHONPATH: "$REPO"}
thresholds: {potential_pct: 2, regression_pct: 5}
YAML
cp /tmp/zh.yaml "$E/zlops.yaml"
zl config check /tmp/zh.yaml > "$E/config_check.txt" 2>&1
python3 -m zlops.cli --plain nightly --config /tmp/zh.yaml --sha "$C1" --run-id h200-night-1 > "$E/nightly1.txt" 2>&1
echo "exit $?" >> "$E/nightly1.txt"
python3 -m zlops.cli --plain nightly --config /tmp/zh.yaml --sha "$C2" --run-id h200-night-2 > "$E/nightly2.txt" 2>&1
echo "exit $?" >> "$E/nightly2.txt"
python3 - > "$E/store_summary.json" 2>&1 <<'PY'
import json
from zlops.config.settings import load_config
from zlops.steps.context import open_store
store = open_store(load_config("/tmp/zh.yaml"))
out = []
for run in store.list_runs():
    extras = store.shard_extras(run.run_key)
    out.append({"run_key": run.run_key, "sha": run.sha, "status": run.status.value, "accepted": run.accepted,
                "shards": [{"pool": s.pool, "device": s.device, "status": s.status.value,
                            "duration_s": s.duration_s, "telemetry": extras.get((s.pool, s.device), {}).get("telemetry"),
                            "identity": extras.get((s.pool, s.device), {}).get("identity")}
                           for s in store.shards(run.run_key)],
                "verdicts": {c.case: [c.verdict.value, c.judgement.change_pct] for c in store.comparisons(run.run_key)}})
print(json.dumps(out, indent=1, default=str))
PY
cp -r /tmp/zh/artifacts "$E/artifacts"
python3 benchmarks/h200/live_nights.py --out "$E/live_smoke.jsonl" --aa 1 --per-size 1 --sizes 0.05 --rounds 3 --pairs 2 > "$E/live_smoke.txt" 2>&1
tar czf "$OUT/evidence.tar.gz" -C "$OUT" evidence && rm -rf "$E"
ls -la "$OUT"
