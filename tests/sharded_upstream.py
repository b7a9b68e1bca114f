"""A fake upstream whose benchmark runs a subset of cases (partitioned suites, zlops.run.partition).

``bench.py --cases a,b`` runs only those cases (none given: every case); each case sleeps
``durations.json[case]`` seconds per round, so the wall time a case costs is known exactly, and
reports it as ``params.duration_s``. ``bench.py --list`` prints the case names (``list_command``).
Every run appends one line to ``$SHARD_LOG`` when set: which device (and ``--tag``, e.g. the shard's
artifact folder) ran which cases, and when: the benchmark processes' own intervals.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from fake_upstream import Upstream, git

BENCH = r'''
import argparse, json, os, sys, time
ap = argparse.ArgumentParser()
ap.add_argument("--out"); ap.add_argument("--device"); ap.add_argument("--rounds", type=int, default=1)
ap.add_argument("--cases", default=""); ap.add_argument("--list", action="store_true")
ap.add_argument("--tag", default="")
a = ap.parse_args()
timings = json.load(open("timings.json"))
durations = json.load(open("durations.json")) if os.path.exists("durations.json") else {}
if a.list:
    print("# cases of the fake sharded bench")
    print("\n".join(sorted(timings)))
    sys.exit(0)
chosen = [c for c in a.cases.split(",") if c] or sorted(timings)
unknown = [c for c in chosen if c not in timings]
if unknown:
    print("unknown cases", unknown, file=sys.stderr); sys.exit(2)
start = time.time()
cases = []
for name in chosen:
    t0 = time.monotonic()
    time.sleep(durations.get(name, 0.0) * a.rounds)
    cases.append({"name": name, "metric": "time", "unit": "ms",
                  "samples": [timings[name] * (1 + 0.001 * (i % 3 - 1)) for i in range(a.rounds)],
                  "params": {"duration_s": round(time.monotonic() - t0, 4)}})
json.dump({"schema_version": 1, "harness": {"name": "fake-sharded"}, "cases": cases}, open(a.out, "w"))
log = os.environ.get("SHARD_LOG")
if log:
    with open(log, "a") as fh:
        fh.write(json.dumps({"device": a.device, "tag": a.tag, "cases": chosen, "start": start, "end": time.time(),
                             "pid": os.getpid()}) + "\n")
'''


class ShardedUpstream(Upstream):
    """:class:`fake_upstream.Upstream` with the sharded bench and per-case durations."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        (path / "bench.py").write_text(BENCH)

    def commit_cases(self, timings: Mapping[str, float], durations: Mapping[str, float],
                     message: str = "change") -> str:
        (self.path / "durations.json").write_text(json.dumps(dict(durations)))
        return self.commit(timings, message)

    def head(self) -> str:
        return git(self.path, "rev-parse", "HEAD")


def sharded_suite(upstream: Path, pools: list[str], *, cases: list[str] | None = None, rounds: int = 2,
                  timeout_s: float = 120) -> dict[str, object]:
    """A partitioned suite on the sharded bench; ``cases`` None lists them with ``bench.py --list``."""
    partition: dict[str, object] = {"cases": cases} if cases is not None else \
        {"list_command": ["python", "bench.py", "--list"]}
    return {
        "repo": str(upstream), "branch": "main",
        "install": [["pip", "install", "-e", "."]],
        "command": ["python", "bench.py", "--out", "{results}", "--device", "{device}", "--rounds", "{rounds}",
                    "--cases", "{cases}"],
        "format": "zlops-json", "pools": pools, "rounds": rounds, "timeout_s": timeout_s,
        "partition": partition, "schedule": None,
    }
