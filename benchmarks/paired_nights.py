"""Plain nightly vs paired nights, side by side, on the demo upstream, in ONE run on this host (issue 23).

Each round runs the demo (zlops.demo: numpy operators, six scripted commits, softmax about +40% at
night 3, layernorm about -34% at night 5) twice, in alternating order:

- ``nightly``: each commit measured alone and judged against the stored baseline by the demo's plain
  2%/5% rule, the contention gate OFF (with it on, a loaded host makes almost every plain night
  invalid: no verdict at all, the issue's "30 of 30 results invalid");
- ``paired``: each commit measured beside its baseline commit in interleaved fresh processes and
  judged from the pairs (zlops.judge.paired), the contention gate ON (it judges each pair's balance).

Optionally a bounded, bursty CPU hog (``--hogs N``: N python busy loops, each on for 1-4 s and off for
0-3 s at random, for at most ``--hog-s`` seconds, ended at exit) adds load on top of whatever the shared
host already runs; the 1-minute load average is sampled every 5 s and reported per demo.

Counted per mode over every demo of the run (nights 2-6 x 5 operators = 25 case-nights a demo; the two
scripted changes are the "real" ones, the other 23 untouched):

- ``false``: untouched case-nights announced as a change (potential, regression, severe, improved),
  and that rate per 1,000 untouched case-nights;
- ``caught``: scripted changes found at their night in the right direction (of 2 per demo);
- ``inconclusive``: untouched case-nights the paired runs neither confirmed nor cleared (stated, never
  alerted); ``unmeasured``: case-nights with no verdict (invalid shard or series);
- the demo's wall time.

    .venv/bin/python benchmarks/paired_nights.py --work /tmp/paired-bench --rounds 2 --hogs 1 --hog-s 1800
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from zlops.demo import HISTORY, OPS, run_demo
from zlops.model import Verdict

CHANGES = {Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE, Verdict.IMPROVED}
HOG = """
import random, sys, time
end = time.monotonic() + float(sys.argv[1])
rng = random.Random(int(sys.argv[2]))
while time.monotonic() < end:
    busy = time.monotonic() + rng.uniform(1, 4)
    while time.monotonic() < busy:
        pass
    time.sleep(rng.uniform(0, 3))
"""


def start_hogs(n: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    """``n`` bursty busy loops that end by themselves after ``seconds``."""
    return [subprocess.Popen([sys.executable, "-c", HOG, str(seconds), str(i)], start_new_session=True)
            for i in range(n)]


class LoadSampler:
    """The 1-minute load average every ``every_s`` seconds, in a thread."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.values: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(every_s,), daemon=True)

    def _loop(self, every_s: float) -> None:
        while not self._stop.is_set():
            self.values.append(os.getloadavg()[0])
            self._stop.wait(every_s)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def score(result: Any) -> dict[str, Any]:
    """The counts of one demo (see the module docstring)."""
    false, caught, inconclusive, unmeasured, untouched, judged = [], 0, 0, 0, 0, 0
    for night, (_, _, expected) in zip(result.nights, HISTORY, strict=False):
        if night.night == 1:
            continue
        for op in OPS:
            verdict, change = night.verdicts.get(op, (Verdict.MISSING, None))
            if night.invalid is not None or verdict in (Verdict.INVALID, Verdict.MISSING, Verdict.FAILED):
                unmeasured += 1
                untouched += op not in expected
                continue
            if op in expected:
                want = expected[op]
                ok = verdict in ((Verdict.REGRESSION, Verdict.SEVERE) if want is Verdict.REGRESSION else (want,))
                caught += ok
                continue
            untouched += 1
            judged += 1
            if verdict in CHANGES:
                false.append(f"night {night.night} {op} {verdict.value} {change:+.1f}%")
            elif verdict.awaiting_confirmation:
                inconclusive += 1
    return {"false": false, "caught": caught, "inconclusive": inconclusive, "unmeasured": unmeasured,
            "untouched": untouched, "judged": judged, "seconds": round(result.seconds or 0.0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="folder for the demo homes and the results")
    ap.add_argument("--rounds", type=int, default=2, help="demos of each mode (alternating order)")
    ap.add_argument("--hogs", type=int, default=0, help="bursty CPU busy loops added beside the demos")
    ap.add_argument("--hog-s", type=float, default=1800, help="the hogs end by themselves after this")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    hogs = start_hogs(args.hogs, args.hog_s)
    rows: list[dict[str, Any]] = []
    try:
        for r in range(args.rounds):
            modes = ("nightly", "paired") if r % 2 == 0 else ("paired", "nightly")
            for mode in modes:
                home = args.work / f"{mode}-{r}"
                with LoadSampler() as load:
                    result = run_demo(home, measure=mode, interactive=False, echo=False,
                                      contention=None if mode == "paired" else {"gate": False})
                row = {"mode": mode, "round": r, **score(result),
                       "load": [round(min(load.values), 2), round(max(load.values), 2)] if load.values else None}
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        for h in hogs:
            try:
                os.killpg(h.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    summary = {}
    for mode in ("nightly", "paired"):
        mine = [x for x in rows if x["mode"] == mode]
        judged = sum(x["judged"] for x in mine)
        false = sum(len(x["false"]) for x in mine)
        summary[mode] = {"demos": len(mine), "untouched_case_nights_judged": judged, "false": false,
                         "false_per_1000": round(1000 * false / judged, 1) if judged else None,
                         "caught": f"{sum(x['caught'] for x in mine)} of {2 * len(mine)}",
                         "inconclusive": sum(x["inconclusive"] for x in mine),
                         "unmeasured": sum(x["unmeasured"] for x in mine),
                         "seconds": [x["seconds"] for x in mine], "load": [x["load"] for x in mine]}
    out = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "hogs": args.hogs, "rows": rows,
           "summary": summary}
    (args.work / "paired_nights.json").write_text(json.dumps(out, indent=1), encoding="utf-8")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
