#!/usr/bin/env bash
# The process and device faults of benchmarks/faults.py on a real GPU: the pool is `cuda` (device
# pinning, idle checks through nvidia-smi, the streaming nvidia-smi telemetry sampler) and every
# benchmark keeps its GPU busy with matmuls. Run from the repository root on the GPU host, with
# zlops' wheels in .whl/ (docs/evidence/h200.md):  OUT=/tmp/out bash benchmarks/h200/faults_gpu.sh
set -uo pipefail
OUT=${OUT:-/tmp/zlops-faults-gpu}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
fi
export ZLOPS_FAULTS_BACKEND=cuda
{ nvidia-smi -L; python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, torch.cuda.is_available())"; } \
  > "$OUT/faults_gpu_env.txt" 2>&1
python3 benchmarks/faults.py --only process,devices --keep /tmp/zf > "$OUT/faults_gpu.md" 2> "$OUT/faults_gpu.err"
rc=$?
# nothing of ours may be left on the GPU, nor any sampler
{ echo "exit $rc"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv; ps -eo pid,pgid,etimes,args | grep -E "nvidia-smi|bench.py" | grep -v grep; } \
  >> "$OUT/faults_gpu_env.txt" 2>&1
tail -c 20000 /tmp/zf/*/zlops*.log > "$OUT/faults_gpu_logs.txt" 2>/dev/null
cat "$OUT/faults_gpu.md"
exit $rc
