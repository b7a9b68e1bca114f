"""Run the test suite's command, then say how long it took and how busy the machine was besides: fail loudly
when it took longer than the limit on a quiet machine (.ci/run).

    python3 .ci/suite_time.py [--limit-min 30] -- bash scripts/test.sh ...

"Quiet": what the rest of the machine used while the suite ran, from /proc/stat's busy CPU time less the CPU time
of the suite's own processes (every process it started and waited for), averaged over the run, is below
``--quiet-cores`` (0.5 of one core). Past the limit on a quiet machine the exit status is 1 and the message says
where the slowest tests are (pytest's ``--durations`` table above it); past the limit on a busy machine it says
so, with the figure, and keeps the suite's own exit status (the time then measures the machine, not the suite).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time


def busy_cpu_s() -> float:
    """All CPUs' busy time since boot, in seconds (/proc/stat's first line less idle and iowait)."""
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]   # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def mmss(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit-min", type=float, default=float(os.environ.get("ZLOPS_CI_SUITE_LIMIT_MIN", 30)))
    ap.add_argument("--quiet-cores", type=float, default=0.5)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    load0, busy0, t0 = loadavg(), busy_cpu_s(), time.monotonic()
    rc = subprocess.call(command)
    wall, busy1, load1 = time.monotonic() - t0, busy_cpu_s(), loadavg()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = kids.ru_utime + kids.ru_stime
    foreign = max(0.0, (busy1 - busy0) - own) / wall if wall > 0 else 0.0
    cores = os.cpu_count() or 1
    print(f"== suite time: {mmss(wall)} ({wall:.0f} s), exit status {rc}; the suite's own CPU {own:.0f} s "
          f"({own / wall:.2f} of {cores} cores); the rest of the machine {foreign:.2f} cores on average; "
          f"load average {load0} at the start, {load1} at the end", flush=True)
    limit = args.limit_min * 60
    if wall <= limit:
        return rc
    if foreign < args.quiet_cores:
        print(f"== FAILED: the test suite took {mmss(wall)} on a quiet machine, over the {args.limit_min:g}-minute "
              "limit (the aim is 25). The slowest tests are listed above (slowest durations); make them cheaper "
              "(docs/benchmarks.md, \"The test suite\") or mark them slow.", flush=True)
        return rc or 1
    print(f"== WARNING: the test suite took {mmss(wall)}, over the {args.limit_min:g}-minute limit, but the machine "
          f"was busy with other work ({foreign:.2f} cores on average besides the suite): not counted as a failure. "
          "The slowest tests are listed above.", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
