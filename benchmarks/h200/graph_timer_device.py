"""Kernel vs cudagraph timer on the device (the issue "Watch the whole suite: time launch-bound kernels with the graph
timer"; not yet run: on 2026-12-06 both calls got no machine; the record is to go to tests/data/flaggems_h200/).

Fresh whole-subset FlagGems processes of one checkout, alternating ``--mode kernel`` (triton.testing.do_bench)
and ``--mode cudagraph`` (triton.testing.do_bench_cudagraph), K G K G ...: each is
``python3 -m pytest benchmark/ -m OPS --level core --dtypes float16 --record log -s -q -p no:cacheprovider
-p zl_timing --warmup 100 --iter 100 --mode MODE`` (the recipe's command plus ``--mode``), with the timing plugin
of flaggems_holdout_record.py (start-up = spawn to the first test's start). No process starts once
``--budget-s`` would be passed (estimate: that mode's last wall time x 1.15). Output in ``--out``:
``<seq>_<mode>.log`` (the record log), ``<seq>_<mode>.timing.tsv``, ``<seq>_<mode>.out.txt`` (the output's
tail) and ``processes.tsv``.

    python3 graph_timer_device.py --checkout /tmp/fg_A --out /tmp/gt --pairs 3 --budget-s 270
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flaggems_holdout_record import PLUGIN  # noqa: E402

HEADER = "seq\tmode\tsha\twall_s\tstartup_s\trc\tstarted_utc\tlog"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkout", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ops", default="var_mean or all or cumsum")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--modes", default="kernel cudagraph")
    ap.add_argument("--budget-s", type=float, default=270)
    ap.add_argument("--extra", default="--warmup 100 --iter 100")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    plugdir = os.path.join(args.out, ".plugin")
    os.makedirs(plugdir, exist_ok=True)
    with open(os.path.join(plugdir, "zl_timing.py"), "w") as fh:
        fh.write(PLUGIN)
    sha = subprocess.run(["git", "-C", args.checkout, "rev-parse", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    tsv = os.path.join(args.out, "processes.tsv")
    with open(tsv, "w") as fh:
        fh.write(HEADER + "\n")
    t_start = time.monotonic()
    last: dict[str, float] = {}
    seq = 0
    for _ in range(args.pairs):
        for mode in args.modes.split():
            need = last.get(mode, 35.0) * 1.15
            left = args.budget_s - (time.monotonic() - t_start)
            if left < need:
                print(f"budget: {left:.0f} s left, {mode} needs ~{need:.0f} s: stopping", flush=True)
                print(f"total {time.monotonic() - t_start:.0f} s, {seq} processes", flush=True)
                return 0
            seq += 1
            stem = f"{seq:02d}_{mode}"
            timing = os.path.join(args.out, stem + ".timing.tsv")
            env = dict(os.environ, ZL_TIMING_FILE=timing,
                       PYTHONPATH=os.pathsep.join(p for p in (plugdir, os.environ.get("PYTHONPATH", "")) if p))
            for stale in glob.glob(os.path.join(args.checkout, "result*.log")):
                os.unlink(stale)
            argv = [sys.executable, "-m", "pytest", "benchmark/", "-m", args.ops, "--level", "core", "--dtypes",
                    "float16", "--record", "log", "-s", "-q", "-p", "no:cacheprovider", "-p", "zl_timing",
                    *args.extra.split(), "--mode", mode]
            started = datetime.now(timezone.utc).isoformat(timespec="seconds")
            t0_epoch = time.time()
            with open(timing, "a") as fh:
                fh.write(f"{t0_epoch:.4f}\tspawn\t{mode}\n")
            t0 = time.monotonic()
            done = subprocess.run(argv, cwd=args.checkout, capture_output=True, text=True, env=env)
            wall = time.monotonic() - t0
            with open(timing, "a") as fh:
                fh.write(f"{time.time():.4f}\texit\t{done.returncode}\n")
            with open(os.path.join(args.out, stem + ".out.txt"), "w") as fh:
                fh.write(done.stdout[-6000:] + "\n--- stderr\n" + done.stderr[-6000:])
            logs = glob.glob(os.path.join(args.checkout, "result*.log"))
            log = stem + ".log"
            if len(logs) == 1:
                shutil.move(logs[0], os.path.join(args.out, log))
            else:
                log = "-"
                print(f"!! {stem}: {len(logs)} record logs; rc={done.returncode}\n{done.stdout[-2000:]}\n"
                      f"{done.stderr[-2000:]}", flush=True)
            starts = [float(line.split("\t")[0]) for line in open(timing) if "\tstart\t" in line]
            startup = (starts[0] - t0_epoch) if starts else float("nan")
            last[mode] = wall
            with open(tsv, "a") as fh:
                fh.write(f"{seq}\t{mode}\t{sha}\t{wall:.2f}\t{startup:.2f}\t{done.returncode}\t{started}\t{log}\n")
            print(f"{stem} wall {wall:6.2f} s start-up {startup:5.2f} s rc={done.returncode} "
                  f"(elapsed {time.monotonic() - t_start:.0f} s)", flush=True)
    print(f"total {time.monotonic() - t_start:.0f} s, {seq} processes", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
