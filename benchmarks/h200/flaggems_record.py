"""Record fresh FlagGems benchmark processes of three commits on one GPU (the data behind
tests/data/flaggems_h200/).

Each process is one ``python3 -m pytest benchmark/ -m <ops> --level core --dtypes float16 --record log``
in a checkout of one commit, started fresh, so each holds its own CUDA context, allocator and
Triton launch path: exactly what one zlops night (or one A/B run) is. Rounds are interleaved
(every round runs A, B and C once, in a random order drawn from ``--seed``), then a few ``-m abs``
processes of A and C measure what a targeted A/B run costs. Every process's record log is kept
as ``<seq>_<kind>_r<round>_<commit>.log`` beside ``processes.tsv`` (seq, round, kind, commit, sha,
wall seconds, exit code, start time); the run stops starting processes once ``--budget-s`` would
be exceeded, so a shorter session still gives whole, balanced rounds.

    python3 flaggems_record.py --checkout A=/tmp/fg_A --checkout B=/tmp/fg_B --checkout C=/tmp/fg_C \
        --out /tmp/rec --rounds 6 --abs-only 4 --budget-s 520
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone

ALL_OPS = "abs or neg or exp or relu or sum"


def run_one(checkout: str, select: str, extra: list[str], log_to: str,
            paths: tuple[str, ...] = ("benchmark/",)) -> tuple[float, int, str]:
    for stale in glob.glob(os.path.join(checkout, "result*.log")):
        os.unlink(stale)
    argv = [sys.executable, "-m", "pytest", *paths, "-m", select, "--level", "core", "--dtypes", "float16",
            "--record", "log", "-s", "-q", "-p", "no:cacheprovider", *extra]
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    done = subprocess.run(argv, cwd=checkout, capture_output=True, text=True)
    wall = time.monotonic() - t0
    logs = glob.glob(os.path.join(checkout, "result*.log"))
    if len(logs) == 1:
        shutil.move(logs[0], log_to)
    else:
        print(f"!! {checkout}: {len(logs)} record logs; rc={done.returncode}\n{done.stdout[-3000:]}\n"
              f"{done.stderr[-3000:]}", flush=True)
    return wall, done.returncode, started


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkout", action="append", required=True, help="NAME=PATH of one commit's checkout")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--abs-only", type=int, default=4, help="-m abs processes per side (A and C)")
    ap.add_argument("--budget-s", type=float, default=520)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--extra", default="", help="extra pytest args, space separated (e.g. --warmup 100)")
    ap.add_argument("--inrun", type=int, default=0, help="only this many processes of A that each measure abs "
                    "and sum --inrun-repeat times (pytest --keep-duplicates): the in-run spread")
    ap.add_argument("--inrun-repeat", type=int, default=3)
    args = ap.parse_args()
    checkouts = dict(item.split("=", 1) for item in args.checkout)
    extra = args.extra.split()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    t_start = time.monotonic()
    seq = 0
    last: dict[str, float] = {}
    rows = ["seq\tround\tkind\tcommit\tsha\twall_s\trc\tstarted_utc\tlog"]

    def sha(name: str) -> str:
        return subprocess.run(["git", "-C", checkouts[name], "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip()

    def step(rnd: int, kind: str, name: str, select: str) -> None:
        nonlocal seq
        seq += 1
        log = f"{seq:02d}_{kind}_r{rnd}_{name}.log"
        wall, rc, started = run_one(checkouts[name], select, extra, os.path.join(args.out, log))
        last[kind] = wall
        rows.append(f"{seq}\t{rnd}\t{kind}\t{name}\t{sha(name)}\t{wall:.2f}\t{rc}\t{started}\t{log}")
        print(f"{seq:02d} round {rnd} {kind:8s} {name} {wall:6.1f} s rc={rc} "
              f"(elapsed {time.monotonic() - t_start:.0f} s)", flush=True)

    def left() -> float:
        return args.budget_s - (time.monotonic() - t_start)

    if args.inrun:
        paths = ("--keep-duplicates", *(["benchmark/test_abs.py", "benchmark/test_sum.py"] * args.inrun_repeat))
        for k in range(1, args.inrun + 1):
            seq += 1
            log = f"{seq:02d}_inrun{args.inrun_repeat}_r{k}_A.log"
            wall, rc, started = run_one(checkouts["A"], "abs or sum", extra, os.path.join(args.out, log), paths)
            rows.append(f"{seq}\t{k}\tinrun{args.inrun_repeat}\tA\t{sha('A')}\t{wall:.2f}\t{rc}\t{started}\t{log}")
            print(f"{seq:02d} inrun {k} A {wall:6.1f} s rc={rc}", flush=True)
        with open(os.path.join(args.out, "processes_inrun.tsv"), "w") as f:
            f.write("\n".join(rows) + "\n")
        return 0
    # round 0 fills the Triton/FlagGems caches of every commit; its logs are kept, marked cold
    for name in sorted(checkouts):
        step(0, "cold", name, ALL_OPS)
    abs_reserve = 2 * args.abs_only * last["cold"] * 0.4
    for rnd in range(1, args.rounds + 1):
        per_process = last.get("full", last["cold"])
        if left() - abs_reserve < len(checkouts) * per_process * 1.1:
            print(f"budget: stopping before round {rnd}", flush=True)
            break
        order = sorted(checkouts)
        rng.shuffle(order)
        for name in order:
            step(rnd, "full", name, ALL_OPS)
    for k in range(1, args.abs_only + 1):
        if left() < 2 * last.get("abs", last["full"] * 0.4 if "full" in last else 15) * 1.1:
            print(f"budget: stopping abs-only before pair {k}", flush=True)
            break
        pair = ["A", "C"] if k % 2 else ["C", "A"]
        for name in pair:
            step(k, "abs", name, "abs")
    with open(os.path.join(args.out, "processes.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print(f"total {time.monotonic() - t_start:.0f} s, {seq} processes", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
