"""Does a refused CUDA-graph capture leave torch's RNG unusable, and what repairs it?

    python benchmarks/h200/capture_repair.py

Seen on an H200 (torch 2.11): after capturing torch.nonzero fails ("operation failed due to a
previous error during capture"), the next torch.randn raises "Offset increment outside graph capture
encountered unexpectedly". This tries each repair in a fresh process and prints what works.
"""

from __future__ import annotations

import subprocess
import sys

CHILD = r'''
import sys, torch
mode = sys.argv[1]
mask = torch.rand(1 << 20, device="cuda") > 0.5
torch.nonzero(mask); torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
states = [gen.get_state() for gen in torch.cuda.default_generators]
try:
    with torch.cuda.graph(g):
        torch.nonzero(mask)
except Exception as exc:
    print("capture refused:", type(exc).__name__, str(exc).splitlines()[0])
if mode == "restore_state":
    for gen, st in zip(torch.cuda.default_generators, states):
        gen.set_state(st)
elif mode == "dummy_capture":
    g2 = torch.cuda.CUDAGraph(); x = torch.zeros(1, device="cuda")
    with torch.cuda.graph(g2):
        x.add_(1)
elif mode == "del_graph":
    del g; torch.cuda.synchronize()
try:
    torch.cuda.synchronize()
    y = torch.randn(8, device="cuda"); torch.cuda.synchronize()
    z = torch.rand(8, device="cuda").sum().item()
    print("after:", mode, "OK")
except Exception as exc:
    print("after:", mode, "FAILED", type(exc).__name__, str(exc).splitlines()[0])
'''

for mode in ("none", "del_graph", "restore_state", "dummy_capture"):
    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True)
    print(done.stdout.strip() or done.stderr.strip()[-500:])
