"""A benchmark leaves something zlops must not read, or the disk is full: only that shard fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from . import Outcome, scenario
from ._kit import CASES, counts, db_url, night, overlaps, setup


def _one_bad_shard(work: Path, env: dict[str, str], expect_error: str, *, prepare: Any = None,
                   **extra: Any) -> Outcome:
    cfg, probe, home = setup(work, devices=(0, 1), env=env, **extra)
    if prepare is not None:
        skipped = prepare(home)
        if skipped:
            return Outcome(True, "", skipped=skipped)
    n = night(cfg, "n1", work / "zlops.log", timeout_s=90)
    c = counts(db_url(work), "nightly:fake:n1")
    bad = c["shards"].get(("local", 1), ("?", ""))
    ok = (n.returncode == 5 and c["status"] == "done" and bad[0] == "failed" and expect_error in bad[1]
          and c["shards"].get(("local", 0), ("?",))[0] == "ok" and "Traceback" not in n.output)
    hang = " (hung: killed at the scenario's limit)" if n.returncode is None else ""
    error = bad[1].splitlines()[0].replace(str(work), "…") if bad[1] else bad[0]
    return Outcome(ok, f"exit {n.returncode}{hang}; shard 1: {error[:150]}",
                   expected=CASES, stored=c["results"], duplicate_rows=c["duplicates"],
                   double_booked=len(overlaps(probe)))


@scenario("a FIFO as the results file (and as run_identity.json)")
def fifo_results(work: Path) -> Outcome:
    return _one_bad_shard(work, {"FAULT_MODE_1": "fifo"}, "a FIFO (named pipe), not a regular file")


@scenario("results file a symlink out of the shard folder")
def symlink_out(work: Path) -> Outcome:
    return _one_bad_shard(work, {"FAULT_MODE_1": "symlink"}, "symlink leading out of the shard folder")


@scenario("results file over results_max_mib")
def oversized(work: Path) -> Outcome:
    return _one_bad_shard(work, {"FAULT_MODE_1": "big", "FAULT_BIG_BYTES": "200000"}, "over the limit of",
                          results_max_mib=0.05)


@scenario("disk full under one shard's folder (a full tmpfs)")
def disk_full(work: Path) -> Outcome:
    from zlops.steps.context import slug

    def full_disk(home: Path) -> str | None:
        if os.geteuid() != 0:
            return "needs root to mount a tmpfs"
        shard = home / "artifacts" / "fake" / slug("nightly:fake:n1") / "local" / "1"
        shard.mkdir(parents=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(shard)], capture_output=True,
                              text=True)
        if done.returncode != 0:
            return f"cannot mount a tmpfs: {done.stderr.strip()}"
        try:
            with (shard / "filler").open("wb") as fh:
                while True:
                    fh.write(b"\0" * 65536)
                    fh.flush()
        except OSError:
            pass
        return None

    try:
        return _one_bad_shard(work, {}, "no space left under", prepare=full_disk)
    finally:
        for mount in (work / "home-a" / "artifacts").glob("fake/*/local/1"):
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)
