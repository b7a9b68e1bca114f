"""torch_ops: a small torch operator suite timed with zlops.timing, writing zlops JSON.

    python bench.py --out results.json [--rounds 5] [--backend cuda] [--only add_16M,mm_4096]

Each case is one operator at one shape. Large bandwidth-bound cases can be made to do known extra
work for noise studies: ZL_INJECT="add_16M=0.05,softmax_8192=0.03" (or the same text in an
``inject.txt`` beside this script, so a commit can carry it) processes 5% / 3% more elements (rows)
in those cases, so their true slowdown is known. Cases whose graph capture the runtime
refuses (nonzero: a host sync) fall back to direct timing and say so in their params.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F

from zlops.timing import time_op


def injections() -> dict[str, float]:
    """Extra work per case, from ZL_INJECT or an ``inject.txt`` committed next to this script."""
    spec = os.environ.get("ZL_INJECT", "")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inject.txt")
    if not spec and os.path.exists(path):
        with open(path) as fh:
            spec = fh.read().strip()
    out = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, frac = item.partition("=")
        out[name] = float(frac)
    return out


def cases(dev: str, inject: dict[str, float]) -> dict[str, Callable[[], object]]:
    torch.manual_seed(0)
    bf16, f32 = torch.bfloat16, torch.float32
    made: dict[str, Callable[[], object]] = {}

    def grow(name: str, n: int) -> int:
        return round(n * (1.0 + inject.get(name, 0.0)))

    a4096 = torch.randn(4096, 4096, device=dev, dtype=bf16)
    made["mm_4096"] = lambda: a4096 @ a4096
    a512 = torch.randn(512, 512, device=dev, dtype=bf16)
    made["mm_512"] = lambda: a512 @ a512
    for name, fn in (("softmax_8192", lambda t: torch.softmax(t, dim=-1)),
                     ("layernorm_8192", lambda t: F.layer_norm(t, (t.shape[-1],))),
                     ("gelu_8192", F.gelu)):
        rows = grow(name, 8192)
        t = torch.randn(rows, 8192, device=dev, dtype=bf16)
        made[name] = (lambda fn=fn, t=t: fn(t))
    small = torch.randn(64, 512, device=dev, dtype=bf16)
    made["softmax_64x512"] = lambda: torch.softmax(small, dim=-1)
    n16 = 16 * 1024 * 1024
    for name, fn in (("add_16M", None), ("sum_16M", torch.sum), ("cumsum_16M", lambda t: torch.cumsum(t, 0)),
                     ("sort_16M", torch.sort), ("topk_16M", lambda t: torch.topk(t, 128))):
        n = grow(name, n16)
        x = torch.randn(n, device=dev, dtype=f32)
        if name == "add_16M":
            y = torch.randn(n, device=dev, dtype=f32)
            made[name] = (lambda x=x, y=y: x + y)
        else:
            made[name] = (lambda fn=fn, x=x: fn(x))
    mask = torch.rand(1 << 20, device=dev) > 0.5
    made["nonzero_1M"] = lambda: torch.nonzero(mask)
    return made


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--device", default="0", help="recorded only: pinning is CUDA_VISIBLE_DEVICES' job")
    ap.add_argument("--backend", default=os.environ.get("ZL_BACKEND", "cuda"))
    ap.add_argument("--only", default="", help="comma-separated case names")
    args = ap.parse_args()
    dev = "cuda" if args.backend in ("cuda", "nvidia", "rocm", "amd", "hip") else args.backend
    inject = injections()
    made = cases(dev, inject)
    only = {s for s in args.only.split(",") if s}
    rows = []
    for name, fn in made.items():
        if only and name not in only:
            continue
        t = time_op(fn, op=name, backend=args.backend, rounds=args.rounds)
        params = {**t.params(), "injected_extra_work": inject.get(name, 0.0)}
        rows.append({"name": name, "metric": "time", "unit": "ms", "lower_is_better": True,
                     "samples": list(t.samples), "params": params})
        print(f"{name:16s} {t.timer:6s} {t.median_ms:.5f} ms  {t.fallback or ''}", flush=True)
    doc = {"schema_version": 1, "harness": {"name": "zlops suites/torch_ops", "version": "1"},
           "context": {"torch": torch.__version__, "device_name": torch.cuda.get_device_name(0)
                       if torch.cuda.is_available() else platform.processor(),
                       "python": sys.version.split()[0], "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                       "inject": inject, "rounds": args.rounds},
           "cases": rows}
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
