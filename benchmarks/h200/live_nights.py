"""Live noise study on a real GPU: A/A nights, then nights with known injected slowdowns.

    python benchmarks/h200/live_nights.py --out nights.jsonl [--aa 14] [--per-size 3] [--rounds 7]

Each night is a fresh process (as a nightly is) running suites/torch_ops/bench.py's cases with
zlops.timing. After the A/A nights, for each injected size (2, 3, 5, 10%) ``--per-size`` nights make
the large bandwidth-bound cases do that much more work (more elements/rows: the true slowdown is
known). In an injected night the process also runs a same-device interleaved A/B of each injected
case (unchanged vs injected shapes, pairs in randomized order) for the confirmation step.

Output, one JSON object per line:
  {"kind": "night", "night": n, "case": c, "inject": s, "timer": t, "samples": [...], "median": m}
  {"kind": "ab", "night": n, "case": c, "inject": s, "base": [...], "head": [...], "order": "ABBA..."}
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INJECTABLE = ("add_16M", "sum_16M", "cumsum_16M", "softmax_8192", "layernorm_8192", "gelu_8192")
SIZES = (0.02, 0.03, 0.05, 0.10)
REFUSED = ("nonzero_1M",)


def one_night(night: int, inject: float, rounds: int, pairs: int, ab_aa: bool = False) -> list[dict[str, object]]:
    sys.path.insert(0, str(ROOT / "suites" / "torch_ops"))
    import bench  # suites/torch_ops/bench.py

    from zlops.timing import time_op

    spec = {c: inject for c in INJECTABLE} if inject else {}
    # both variants are built before anything is timed: a refused capture (nonzero) can leave torch's
    # RNG unusable for later allocations (benchmarks/h200/capture_repair.py)
    do_ab = bool(inject) or ab_aa
    base = bench.cases("cuda", {}) if do_ab else {}
    made = bench.cases("cuda", spec)
    out: list[dict[str, object]] = []

    def measure(names: list[str]) -> None:
        for name in names:
            t = time_op(made[name], op=name, backend="cuda", rounds=rounds)
            out.append({"kind": "night", "night": night, "case": name, "inject": spec.get(name, 0.0),
                        "timer": t.timer, "fallback": t.fallback, "samples": list(t.samples), "median": t.median_ms})

    # cases whose capture is refused go last: the refusal can leave torch's RNG state unusable
    measure([n for n in made if n not in REFUSED])
    if do_ab:
        rng = random.Random(night)
        for name in INJECTABLE:
            a_s: list[float] = []
            b_s: list[float] = []
            order = ""
            for _ in range(pairs):
                pair = "AB" if rng.random() < 0.5 else "BA"
                order += pair
                for side in pair:
                    fn = base[name] if side == "A" else made[name]
                    t = time_op(fn, op=name, backend="cuda", rounds=1, warmup=1)
                    (a_s if side == "A" else b_s).append(t.samples[0])
            out.append({"kind": "ab", "night": night, "case": name, "inject": inject, "base": a_s, "head": b_s,
                        "order": order})
    measure([n for n in made if n in REFUSED])
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--aa", type=int, default=14)
    ap.add_argument("--per-size", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--ab-aa", action="store_true", help="also run the A/B on A/A nights (A against A)")
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="injected slowdowns, e.g. 0.02,0.05")
    ap.add_argument("--night", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--inject", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.night is not None:  # the child: one night in this fresh process
        for rec in one_night(args.night, args.inject, args.rounds, args.pairs, args.ab_aa):
            print(json.dumps(rec))
        return 0
    sizes = [float(s) for s in args.sizes.split(",") if s]
    plan = [0.0] * args.aa + [s for s in sizes for _ in range(args.per_size)]
    with open(args.out, "w") as fh:
        for n, inject in enumerate(plan, start=1):
            child = [sys.executable, __file__, "--out", "-", "--night", str(n), "--inject", str(inject),
                     "--rounds", str(args.rounds), "--pairs", str(args.pairs)] + (["--ab-aa"] if args.ab_aa else [])
            done = subprocess.run(child,
                                  capture_output=True, text=True, env=os.environ.copy())
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return done.returncode
            fh.write(done.stdout)
            fh.flush()
            meds = {r["case"]: r["median"] for r in map(json.loads, done.stdout.splitlines()) if r["kind"] == "night"}
            print(f"night {n:2d} inject {inject:.2f}: add_16M {meds['add_16M']:.4f} ms, "
                  f"mm_4096 {meds['mm_4096']:.4f} ms ({statistics.fmean(meds.values()):.4f} mean)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
