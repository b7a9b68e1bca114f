"""Two nights want one device at once: two homes (two configs) on one host, two runs of one home."""

from __future__ import annotations

from pathlib import Path

from . import Outcome, scenario
from ._kit import CASES, counts, db_url, overlaps, setup, start_nightly


def _concurrent(work: Path, names: tuple[str, str], same_home: bool) -> Outcome:
    cfgs = [setup(work, sleep_s=4, name=names[0])[0]]
    cfgs.append(cfgs[0] if same_home else setup(work, sleep_s=4, name=names[1])[0])
    probe = work / "probe"
    logs = [work / f"zlops-{i}.log" for i in (0, 1)]
    procs = [start_nightly(cfg, f"n{i}", log=logs[i]) for i, cfg in enumerate(cfgs)]
    rcs = [p.wait(300) for p in procs]
    got = [counts(db_url(work, names[0] if same_home else names[i]), f"nightly:fake:n{i}") for i in (0, 1)]
    booked = len(overlaps(probe))
    ok = rcs == [0, 0] and booked == 0 and [c["status"] for c in got] == ["done", "done"]
    return Outcome(ok, f"exit codes {rcs}; runs {[c['status'] for c in got]}", expected=2 * CASES,
                   stored=sum(c["results"] for c in got), duplicate_rows=sum(c["duplicates"] for c in got),
                   double_booked=booked)


@scenario("two homes (two configs), one device, at once")
def two_homes_one_device(work: Path) -> Outcome:
    return _concurrent(work, ("a", "b"), same_home=False)


@scenario("two nightlies of one home, one device, at once")
def two_runs_one_home(work: Path) -> Outcome:
    return _concurrent(work, ("a", "a"), same_home=True)

