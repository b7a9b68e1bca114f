"""zlops itself dies or is told to stop mid-benchmark: SIGKILL, SIGTERM, SIGHUP, SIGINT."""

from __future__ import annotations

import signal
from pathlib import Path

from . import Outcome, scenario
from ._kit import (
    CASES,
    alive,
    counts,
    db_url,
    kill_quietly,
    night,
    overlaps,
    setup,
    start_nightly,
    wait_gone,
    wait_started,
    with_sleep,
)


@scenario("SIGKILL of zlops mid-benchmark, then the next night")
def sigkill_then_next_night(work: Path) -> Outcome:
    # the killed night's benchmark would run 20 s more: long enough that a next night started at
    # once meets it on the device unless something stops that
    cfg, probe, _ = setup(work, sleep_s=20)
    log = work / "zlops.log"
    p1 = start_nightly(cfg, "n1", log=log)
    orphan = wait_started(probe, proc=p1, log=log)[0]
    try:
        p1.send_signal(signal.SIGKILL)
        p1.wait(10)
        orphan_ran = alive(orphan)
        n2 = night(with_sleep(cfg, 2), "n2", log)
        c1, c2 = counts(db_url(work), "nightly:fake:n1"), counts(db_url(work), "nightly:fake:n2")
        booked = len(overlaps(probe))
        ok = (n2.returncode == 0 and booked == 0 and c1["status"] == "interrupted" and c2["status"] == "done"
              and not alive(orphan))
        return Outcome(ok, f"orphan {'ran on' if orphan_ran else 'was gone'} after the kill; next night rc "
                           f"{n2.returncode}; killed run {c1['status']}", expected=CASES, stored=c2["results"],
                       duplicate_rows=c1["duplicates"] + c2["duplicates"], double_booked=booked)
    finally:
        kill_quietly(orphan)


def _signalled(work: Path, sig: signal.Signals) -> Outcome:
    cfg, probe, _ = setup(work, sleep_s=20)
    log = work / "zlops.log"
    p1 = start_nightly(cfg, "n1", log=log)
    bench = wait_started(probe, proc=p1, log=log)[0]
    try:
        p1.send_signal(sig)
        rc = p1.wait(60)
        gone = wait_gone(bench, 5)
        n2 = night(with_sleep(cfg, 2), "n2", log)
        c1, c2 = counts(db_url(work), "nightly:fake:n1"), counts(db_url(work), "nightly:fake:n2")
        booked = len(overlaps(probe))
        ok = (rc == 128 + sig and gone and c1["status"] == "interrupted" and n2.returncode == 0
              and c2["status"] == "done" and booked == 0)
        return Outcome(ok, f"zlops exit {rc}, benchmark {'ended' if gone else 'still running'}, run "
                           f"{c1['status']}; next night rc {n2.returncode}", expected=CASES, stored=c2["results"],
                       duplicate_rows=c1["duplicates"] + c2["duplicates"], double_booked=booked)
    finally:
        kill_quietly(bench)


@scenario("SIGTERM of zlops mid-benchmark")
def sigterm(work: Path) -> Outcome:
    return _signalled(work, signal.SIGTERM)


@scenario("SIGHUP of zlops mid-benchmark")
def sighup(work: Path) -> Outcome:
    return _signalled(work, signal.SIGHUP)


@scenario("SIGINT (Ctrl-C) of zlops mid-benchmark")
def sigint(work: Path) -> Outcome:
    return _signalled(work, signal.SIGINT)
