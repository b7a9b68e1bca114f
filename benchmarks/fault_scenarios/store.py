"""The store itself: a damaged SQLite file (header, inner page), a full disk that holds it, and a
mostly failed night that must not become its baseline (issue 24)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

from . import Outcome, scenario
from ._kit import CASES, counts, db_url, night, overlaps, setup


def _damaged(work: Path, how: str) -> Outcome:
    from zlops.store import Store

    db = work / "a.db"
    Store.open(db_url(work)).dispose()
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
    with db.open("r+b") as fh:
        if how == "header":
            fh.write(b"\0garbage-header\0")
        else:
            fh.seek((root - 1) * page)
            fh.write(b"\x07" + b"\xff" * 200)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    cfg, probe, _ = setup(work)
    n = night(cfg, "n1", work / "zlops.log", timeout_s=120)
    lines = [line for line in n.output.splitlines() if line.startswith("zlops: ")]
    same = hashlib.sha256(db.read_bytes()).hexdigest() == before
    ok = (n.returncode == 1 and len(lines) == 1 and lines[0].startswith("zlops: store corrupt: ")
          and "Traceback" not in n.output and same)
    return Outcome(ok, f"exit {n.returncode}; file {'unchanged' if same else 'WRITTEN'}; "
                       f"{(lines or ['(no line)'])[0].replace(str(work), '…')[:170]}",
                   double_booked=len(overlaps(probe)))


@scenario("SQLite store with a damaged header")
def damaged_header(work: Path) -> Outcome:
    return _damaged(work, "header")


@scenario("SQLite store with a damaged inner page")
def damaged_page(work: Path) -> Outcome:
    return _damaged(work, "page")


@scenario("a benchmark fills the disk that holds the store (a 20 MiB tmpfs)")
def full_disk_with_the_store(work: Path) -> Outcome:
    if os.geteuid() != 0:
        return Outcome(True, "", skipped="needs root to mount a tmpfs")
    disk = work / "disk"
    disk.mkdir(exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(disk)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        return Outcome(True, "", skipped=f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        import yaml

        cfg, probe, _ = setup(work, env={"FAULT_MODE": "fill"})
        data = yaml.safe_load(cfg.read_text())
        data["home"] = str(disk / "home")
        data["database"] = f"sqlite:///{disk / 'home' / 'zlops.db'}"
        cfg.write_text(yaml.safe_dump(data))
        n = night(cfg, "n1", work / "zlops.log", timeout_s=120)
        c = counts(data["database"], "nightly:fake:n1")
        freed = "was full when the shard ended; removed the worktree" in n.output
        ok = n.returncode == 1 and c["status"] == "failed" and freed and "Traceback" not in n.output
        return Outcome(ok, f"exit {n.returncode}; run {c['status']}; worktree removed at shard end: {freed}; "
                           f"shard: {c['shards'].get(('local', 0), ('?', ''))[1].replace(str(work), '…')[:120]}",
                       double_booked=len(overlaps(probe)))
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, check=False)


@scenario("8 of 9 shards failed: the night is not promoted")
def mostly_failed_night(work: Path) -> Outcome:
    env = {f"FAULT_MODE_{d}": "crash" for d in range(1, 9)}
    cfg, probe, _ = setup(work, devices=tuple(range(9)), env=env)
    n = night(cfg, "n1", work / "zlops.log")
    import sqlalchemy as sa

    engine = sa.create_engine(db_url(work))
    with engine.connect() as conn:
        accepted = conn.execute(sa.text("SELECT accepted FROM runs WHERE run_key = 'nightly:fake:n1'")).scalar_one()
    engine.dispose()
    c = counts(db_url(work), "nightly:fake:n1")
    ok = n.returncode == 5 and c["status"] == "done" and not accepted and "1 of 9 shards" in n.output
    return Outcome(ok, f"exit {n.returncode}; run {c['status']}, accepted {bool(accepted)}",
                   expected=CASES, stored=c["results"], duplicate_rows=c["duplicates"],
                   double_booked=len(overlaps(probe)))
