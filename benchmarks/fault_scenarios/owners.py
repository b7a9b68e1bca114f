"""Who holds what: two ``zlops nightly`` of one run id at once, and a benchmark that leaves a detached
worker on its device (issue 24)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from . import Outcome, scenario
from ._kit import CASES, counts, db_url, kill_quietly, night, overlaps, setup, start_nightly, wait_gone, wait_started


@scenario("two zlops nightly of one run id at once")
def two_of_one_run_id(work: Path) -> Outcome:
    cfg, probe, _ = setup(work, sleep_s=8)
    log = work / "zlops.log"
    p1 = start_nightly(cfg, "n1", log=log)
    bench = wait_started(probe, proc=p1, log=log)[0]
    try:
        second = night(cfg, "n1", work / "second.log", timeout_s=60)
        refused = [line for line in second.output.splitlines() if line.startswith("zlops: refused: run ")]
        rc1 = p1.wait(120)
        starts = sum(1 for line in (probe / "events.log").read_text().splitlines() if line.startswith("start "))
        c = counts(db_url(work), "nightly:fake:n1")
        ok = (second.returncode == 2 and len(refused) == 1 and f"pid {p1.pid}" in refused[0] and rc1 == 0
              and starts == 1 and c["status"] == "done")
        return Outcome(ok, f"second: exit {second.returncode} in {second.seconds:.1f} s: "
                           f"{(refused or ['(no refusal line)'])[0][:140]}; owner exit {rc1}; benchmark ran {starts}x",
                       expected=CASES, stored=c["results"], duplicate_rows=c["duplicates"],
                       double_booked=len(overlaps(probe)))
    finally:
        kill_quietly(bench)
        kill_quietly(p1.pid)


@scenario("a benchmark leaves a detached worker on its device, then the next night")
def detached_worker(work: Path) -> Outcome:
    cfg, probe, _ = setup(work, env={"FAULT_MODE": "detach", "FAULT_DETACH_S": "60"}, device_wait_s=3)
    n1 = night(cfg, "n1", work / "zlops.log")
    worker = int((probe / "detached.pid").read_text()) if (probe / "detached.pid").exists() else -1
    try:
        import yaml

        data = yaml.safe_load(cfg.read_text())
        data["suites"]["fake"]["env"]["FAULT_MODE"] = ""
        cfg2 = cfg.with_name("zlops-next.yaml")
        cfg2.write_text(yaml.safe_dump(data))
        night(cfg2, "n2", work / "zlops.log")
        c2 = counts(db_url(work), "nightly:fake:n2")
        shard = c2["shards"].get(("local", 0), ("?", ""))
        booked = len(overlaps(probe))
        os.kill(worker, signal.SIGKILL)
        wait_gone(worker)
        time.sleep(0.2)
        n3 = night(cfg2, "n3", work / "zlops.log")
        c3 = counts(db_url(work), "nightly:fake:n3")
        ok = (n1.returncode == 0 and shard[0] == "skipped" and f"pid {worker}" in shard[1] and booked == 0
              and n3.returncode == 0 and c3["status"] == "done")
        return Outcome(ok, f"next night's shard {shard[0]}: {shard[1][:160]}; after the worker ended: exit "
                           f"{n3.returncode}", expected=CASES, stored=c3["results"],
                       duplicate_rows=c2["duplicates"] + c3["duplicates"], double_booked=booked)
    finally:
        if worker > 0:
            kill_quietly(worker)
