"""Record fresh FlagGems benchmark processes of two commits, A and S, interleaved on one GPU: the data behind
tests/data/flaggems_h200/holdout_2026-12-01/ (issue 22's hold-out check; the upstream is built by
flaggems_holdout_upstream.sh).

Each process is one ``python3 -m pytest benchmark/ -m <ops> --level core --dtypes float16 --record log`` in a
checkout of one commit, started fresh (its own CUDA context, allocator and Triton launch path): exactly what one
zlops night or one A/B run is. A tiny pytest plugin (``-p zl_timing``, written next to the output) stamps the
wall clock at configure, at the end of collection and at the start and end of every test, so each process
also says what it spent before its first measurement (start-up) and what each op cost.

Phases (``--phase``, in order; pairs run A and S in a random order per pair, drawn from ``--seed``):

- ``cold``: A and S once each, first touch of the Triton caches (kind ``cold``); with ``--cold-cache-dir DIR``
  each in an empty ``TRITON_CACHE_DIR`` of its own, ``DIR/<label>``, kept (what it compiled)
- ``pairs:N``: N pairs of whole-subset processes (kind ``full``); ``pairs:*`` = as many as the budget allows
- ``sel:EXPR:N``: N pairs that run only ``-m EXPR`` (kind ``sel``), e.g. ``sel:mean:3``
- ``one:LABEL:EXPR``: one process of LABEL running ``-m EXPR``
- ``probe:N``: N ``python3 -c 'import torch, flag_gems'`` in A's checkout (kind ``probe``): the import cost

No step starts once ``--budget-s`` would be exceeded (the estimate is the last wall time of that kind).
Output: ``<seq>_<kind>_<label>.log`` (the record log), ``<seq>_<kind>_<label>.timing.tsv`` (the plugin's
stamps, epoch seconds) and ``processes.tsv``.

    python3 flaggems_holdout_record.py --checkout A=/tmp/fg_A --checkout S=/tmp/fg_S --out /tmp/rec \\
        --phase cold --phase pairs:6 --phase sel:mean:3 --phase probe:2 --budget-s 500
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

PLUGIN = '''
import os, time
_f = os.environ.get("ZL_TIMING_FILE")


def _w(ev, what=""):
    if _f:
        with open(_f, "a") as fh:
            fh.write(f"{time.time():.4f}\\t{ev}\\t{what}\\n")


def pytest_configure(config):
    _w("configure")


def pytest_collection_finish(session):
    _w("collected", str(len(session.items)))


def pytest_runtest_logstart(nodeid, location):
    _w("start", nodeid)


def pytest_runtest_logfinish(nodeid, location):
    _w("finish", nodeid)
'''

HEADER = "seq\tlabel\tsha\tkind\tselection\twall_s\tstartup_s\trc\tstarted_utc\tlog\ttiming"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkout", action="append", required=True, help="LABEL=PATH of one commit's checkout")
    ap.add_argument("--out", required=True)
    ap.add_argument("--phase", action="append", required=True)
    ap.add_argument("--ops", default="mean or amax or add")
    ap.add_argument("--budget-s", type=float, default=500)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--seq-start", type=int, default=1)
    ap.add_argument("--extra", default="--warmup 100 --iter 100", help="extra pytest args, space separated")
    ap.add_argument("--cold-cache-dir", default="",
                    help="give each cold process TRITON_CACHE_DIR=DIR/<label> (empty at start), kept for its kernels")
    args = ap.parse_args()
    checkouts = dict(item.split("=", 1) for item in args.checkout)
    labels = sorted(checkouts)
    extra = args.extra.split()
    os.makedirs(args.out, exist_ok=True)
    plugdir = os.path.join(args.out, ".plugin")
    os.makedirs(plugdir, exist_ok=True)
    with open(os.path.join(plugdir, "zl_timing.py"), "w") as fh:
        fh.write(PLUGIN)
    rng = random.Random(args.seed)
    t_start = time.monotonic()
    seq = args.seq_start - 1
    last: dict[str, float] = {}
    tsv = os.path.join(args.out, "processes.tsv")
    if not os.path.exists(tsv):
        with open(tsv, "w") as fh:
            fh.write(HEADER + "\n")

    def sha(label: str) -> str:
        return subprocess.run(["git", "-C", checkouts[label], "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip()

    def left() -> float:
        return args.budget_s - (time.monotonic() - t_start)

    def run(label: str, kind: str, select: str) -> None:
        nonlocal seq
        seq += 1
        stem = f"{seq:03d}_{kind}_{label}"
        checkout = checkouts[label]
        timing = os.path.join(args.out, stem + ".timing.tsv")
        env = dict(os.environ, ZL_TIMING_FILE=timing,
                   PYTHONPATH=os.pathsep.join(p for p in (plugdir, os.environ.get("PYTHONPATH", "")) if p))
        if kind == "cold" and args.cold_cache_dir:
            env["TRITON_CACHE_DIR"] = os.path.join(args.cold_cache_dir, label)
            shutil.rmtree(env["TRITON_CACHE_DIR"], ignore_errors=True)
        if kind == "probe":
            argv = [sys.executable, "-c", "import torch, flag_gems"]
            env["PYTHONPATH"] += os.pathsep + os.path.join(checkout, "src")
        else:
            for stale in glob.glob(os.path.join(checkout, "result*.log")):
                os.unlink(stale)
            argv = [sys.executable, "-m", "pytest", "benchmark/", "-m", select, "--level", "core", "--dtypes",
                    "float16", "--record", "log", "-s", "-q", "-p", "no:cacheprovider", "-p", "zl_timing", *extra]
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        t0_epoch = time.time()
        t0 = time.monotonic()
        with open(timing, "a") as fh:
            fh.write(f"{t0_epoch:.4f}\tspawn\t{label}\n")
        done = subprocess.run(argv, cwd=checkout, capture_output=True, text=True, env=env)
        wall = time.monotonic() - t0
        with open(timing, "a") as fh:
            fh.write(f"{time.time():.4f}\texit\t{done.returncode}\n")
        log = stem + ".log"
        if kind == "probe":
            log = "-"
            startup = wall
        else:
            logs = glob.glob(os.path.join(checkout, "result*.log"))
            if len(logs) == 1:
                shutil.move(logs[0], os.path.join(args.out, log))
            else:
                log = "-"
                print(f"!! {stem}: {len(logs)} record logs; rc={done.returncode}\n{done.stdout[-3000:]}\n"
                      f"{done.stderr[-3000:]}", flush=True)
            starts = [float(line.split("\t")[0]) for line in open(timing) if "\tstart\t" in line]
            startup = (starts[0] - t0_epoch) if starts else float("nan")
        last[kind + ":" + select] = wall
        with open(tsv, "a") as fh:
            fh.write(f"{seq}\t{label}\t{sha(label)}\t{kind}\t{select}\t{wall:.2f}\t{startup:.2f}\t"
                     f"{done.returncode}\t{started}\t{log}\t{stem}.timing.tsv\n")
        print(f"{seq:03d} {kind:5s} {label} [{select}] wall {wall:6.2f} s start-up {startup:5.2f} s "
              f"rc={done.returncode} (elapsed {time.monotonic() - t_start:.0f} s)", flush=True)

    def affordable(kind: str, select: str, n: int, default: float) -> bool:
        fallback = last.get("full:" + args.ops, last.get("cold:" + args.ops, default))
        need = n * last.get(kind + ":" + select, fallback) * 1.1
        if left() < need:
            print(f"budget: {left():.0f} s left, {kind} [{select}] x{n} needs ~{need:.0f} s: stopping", flush=True)
            return False
        return True

    for phase in args.phase:
        parts = phase.split(":")
        if parts[0] == "cold":
            order = labels[:]
            rng.shuffle(order)
            for label in order:
                if not affordable("cold", args.ops, 1, 30):
                    return finish(t_start, seq)
                run(label, "cold", args.ops)
        elif parts[0] in ("pairs", "sel"):
            kind = "full" if parts[0] == "pairs" else "sel"
            select = args.ops if kind == "full" else parts[1]
            n = parts[-1]
            k = 0
            while n == "*" or k < int(n):
                if not affordable(kind, select, 2, 25):
                    break
                order = labels[:]
                rng.shuffle(order)
                for label in order:
                    run(label, kind, select)
                k += 1
        elif parts[0] == "one":
            if affordable("one", parts[2], 1, 20):
                run(parts[1], "one", parts[2])
        elif parts[0] == "probe":
            for _ in range(int(parts[1])):
                if affordable("probe", "", 1, 10):
                    run(labels[0], "probe", "")
        else:
            raise SystemExit(f"unknown phase {phase!r}")
    return finish(t_start, seq)


def finish(t_start: float, seq: int) -> int:
    print(f"total {time.monotonic() - t_start:.0f} s, last seq {seq}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
