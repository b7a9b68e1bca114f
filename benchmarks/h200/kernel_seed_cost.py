"""What the kernel inventory costs a real FlagGems process on one GPU, in zlops' three ways (issue 25):

- ``none``: no ``kernels:``: the host's shared ``TRITON_CACHE_DIR``, warm with last night's kernels (a copy
  of last night's cache each round, so tonight's changed kernels are compiled here too, as they would be);
- ``empty``: ``kernels: triton`` without a seed: the shard's own empty cache (every kernel compiled);
- ``seeded``: ``kernels: triton`` seeded from last night's shard cache (zlops.kernels.seed): the kernels
  the commit did not change are taken, the others compiled.

"Last night" is one process of checkout P in an empty cache of its own (what last night's shard left);
"tonight" is checkout T, run in the three ways in rounds, their order rotated every round. The
inventory variants go through zlops' own provider (zlops.kernels.providers.TritonProvider: prepare,
the process, collect, release), so the wall time includes staging the seed and reading the cache;
each records its kernels.json. Only the standard library and zlops' kernels package (from this checkout,
put on the driver's sys.path only) are imported: no pydantic, no store.

    python3 kernel_seed_cost.py --checkout P=/tmp/fg_P --checkout T=/tmp/fg_T --out /tmp/seed --rounds 4

Output in ``--out``: ``processes.tsv`` (one line a process), ``<seq>_<variant>.log`` (its output),
``<seq>_<variant>.kernels.json`` (its inventory) and ``summary.md`` (median wall per variant, the
differences, the inventories' summaries).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from zlops.kernels.inventory import write_inventory
from zlops.kernels.providers import TritonProvider
from zlops.kernels.seed import SeedPlan

VARIANTS = ("none", "empty", "seeded")
HEADER = "seq\tlabel\tvariant\twall_s\tprocess_s\tprepare_s\tcollect_s\trc\tkernels\tcompiled\tseeded\tsummary"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", action="append", required=True, help="P=DIR (last night) and T=DIR (tonight)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--ops", default="mean or amax or add", help="pytest -m expression")
    ap.add_argument("--extra", default="--warmup 100 --iter 100", help="extra pytest args, space separated")
    ap.add_argument("--budget-s", type=float, default=540)
    args = ap.parse_args()
    checkouts = dict(item.split("=", 1) for item in args.checkout)
    if set(checkouts) != {"P", "T"}:
        raise SystemExit("--checkout P=DIR --checkout T=DIR (last night's commit and tonight's)")
    out = Path(args.out)
    caches = out / "caches"
    shutil.rmtree(caches, ignore_errors=True)
    caches.mkdir(parents=True)
    (out / "processes.tsv").write_text(HEADER + "\n")
    t_start = time.monotonic()
    seq = 0
    walls: dict[str, list[float]] = {v: [] for v in VARIANTS}
    summaries: dict[str, str] = {}
    provider = TritonProvider()
    base_env = dict(os.environ)

    def run(label: str, variant: str, cache: Path, seed: SeedPlan | None) -> float:
        nonlocal seq
        seq += 1
        stem = f"{seq:03d}_{variant}_{label}"
        checkout = checkouts[label]
        for stale in glob.glob(os.path.join(checkout, "result*.log")):
            os.unlink(stale)
        env = dict(base_env)
        shutil.rmtree(cache, ignore_errors=True)
        if variant == "none":  # the warm shared cache as last night left it (copied before the clock starts)
            shutil.copytree(caches / "last_night", cache, symlinks=True)
        t0 = time.monotonic()
        prepared = None
        if variant == "none":
            env["TRITON_CACHE_DIR"] = str(cache)
        else:
            prepared = provider.prepare(cache, seed=seed, suite_env={"PYTHONPATH": env.get("PYTHONPATH", "")})
            env.update(prepared.env)
        t1 = time.monotonic()
        argv = [sys.executable, "-m", "pytest", "benchmark/", "-m", args.ops, "--level", "core", "--dtypes",
                "float16", "--record", "log", "-s", "-q", "-p", "no:cacheprovider", *args.extra.split()]
        done = subprocess.run(argv, cwd=checkout, capture_output=True, text=True, env=env)
        t2 = time.monotonic()
        summary, kernels, compiled, seeded = "-", 0, 0, 0
        if prepared is not None:
            inv = provider.collect(prepared, max_kernels=2000)
            provider.release(prepared)
            write_inventory(out, inv)
            os.replace(out / "kernels.json", out / f"{stem}.kernels.json")
            summary = inv.summary()
            kernels, seeded = len(inv.kernels), inv.seeded
            compiled = sum(1 for k in inv.kernels if k.compiled)
        t3 = time.monotonic()
        wall = t3 - t0
        (out / f"{stem}.log").write_text(f"$ {' '.join(argv)}\n# env added: "
                                         f"{json.dumps({k: v for k, v in env.items() if base_env.get(k) != v})}\n"
                                         f"{done.stdout[-20000:]}\n--- stderr ---\n{done.stderr[-20000:]}")
        with open(out / "processes.tsv", "a") as fh:
            fh.write(f"{seq}\t{label}\t{variant}\t{wall:.2f}\t{t2 - t1:.2f}\t{t1 - t0:.3f}\t{t3 - t2:.3f}\t"
                     f"{done.returncode}\t{kernels}\t{compiled}\t{seeded}\t{summary}\n")
        print(f"{seq:03d} {label} {variant:6s} wall {wall:6.2f} s (process {t2 - t1:6.2f} s, prepare "
              f"{t1 - t0:5.3f} s, collect {t3 - t2:5.3f} s) rc={done.returncode} {summary} "
              f"(elapsed {time.monotonic() - t_start:.0f} s)", flush=True)
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", flush=True)
        summaries[variant] = summary
        return wall

    last = caches / "last_night"
    run("P", "empty", last, None)              # last night's shard: its own empty cache, everything compiled
    seed = SeedPlan(run_key="last_night", caches=(last,))
    per_round = None
    for r in range(args.rounds):
        if per_round is not None and time.monotonic() - t_start + per_round * 1.1 > args.budget_s:
            print(f"budget: {args.budget_s - (time.monotonic() - t_start):.0f} s left, a round needs "
                  f"~{per_round:.0f} s: stopping after {r} rounds", flush=True)
            break
        t_round = time.monotonic()
        for variant in VARIANTS[r % 3:] + VARIANTS[:r % 3]:
            walls[variant].append(run("T", variant, caches / f"r{r}_{variant}",
                                      seed if variant == "seeded" else None))
        per_round = time.monotonic() - t_round
    lines = [f"# kernel inventory cost, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             (f"P {checkouts['P']}, T {checkouts['T']}; pytest -m '{args.ops}' {args.extra}; "
              f"{len(walls['none'])} rounds"), "", "| variant | median wall | min | runs | vs none |",
             "|---|---:|---:|---:|---:|"]
    base = statistics.median(walls["none"]) if walls["none"] else float("nan")
    for variant in VARIANTS:
        if not walls[variant]:
            continue
        med = statistics.median(walls[variant])
        lines.append(f"| {variant} | {med:.2f} s | {min(walls[variant]):.2f} s | {len(walls[variant])} | "
                     f"{med - base:+.2f} s ({(med - base) / base * 100:+.1f}%) |")
    lines += ["", *(f"- {v}: {s}" for v, s in summaries.items())]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    shutil.rmtree(caches, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
