"""A damaged store: the night ends in one line saying what to do, writes nothing more into it, and
``zlops store check`` says the same. Real SQLite files damaged on disk (the header, an inner page),
real PostgreSQL, real ``zlops`` subprocesses."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from fault_upstream import REPO, fault_config, make_upstream, write_config

from zlops.store import Store

pytestmark = pytest.mark.timeout(240)


def _zlops(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zlops.cli", "--plain", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=200)


def _store(path: Path) -> str:
    """A migrated SQLite store, checkpointed so every page is in the main file."""
    url = f"sqlite:///{path}"
    Store.open(url).dispose()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert not Path(f"{path}-wal").exists()
    return url


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _damage_inner_page(path: Path, table: str = "runs") -> None:
    with closing(sqlite3.connect(path)) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    with path.open("r+b") as fh:  # the b-tree page of the table: a bad page type and garbage cells
        fh.seek((root - 1) * page_size)
        fh.write(b"\x07" + b"\xff" * 200)


def _config(tmp_path: Path, url: str) -> Path:
    up, _ = make_upstream(tmp_path / "up")
    return write_config(tmp_path / "zlops.yaml", fault_config(tmp_path / "home", up.path, tmp_path / "probe",
                                                              database=url))


@pytest.mark.parametrize("damage", ["header", "inner page"])
def test_a_damaged_sqlite_store_ends_the_night_in_one_line_and_is_never_written(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "zlops.db"
    url = _store(db)
    if damage == "header":
        with db.open("r+b") as fh:
            fh.write(b"\x00garbage-header\x00")
    else:
        _damage_inner_page(db)
    before = _sha(db)
    cfg = _config(tmp_path, url)
    night = _zlops("nightly", "--config", str(cfg), "--suite", "fake", "--run-id", "n1")
    out = night.stdout + night.stderr
    assert night.returncode == 1, out
    assert "Traceback" not in out, out
    lines = [line for line in out.splitlines() if line.startswith("zlops: ")]
    assert len(lines) == 1 and lines[0].startswith("zlops: store corrupt: sqlite:///"), out
    assert "Restore it from a backup" in lines[0] and "zlops store check" in lines[0]
    assert ("is not an SQLite database" if damage == "header" else "PRAGMA quick_check") in lines[0]
    wal = Path(f"{db}-wal")  # a read-only connection may create an empty WAL; never a frame in it
    assert _sha(db) == before and (not wal.exists() or wal.stat().st_size == 0)  # nothing more was written
    assert not (tmp_path / "home" / "worktrees").exists()  # the night stopped before any work
    check = _zlops("store", "check", "--config", str(cfg))
    assert check.returncode == 1 and check.stderr.startswith("zlops: store corrupt: ")
    assert "Traceback" not in check.stderr
    assert _sha(db) == before


def test_store_check_passes_a_healthy_sqlite_store_and_a_restored_backup(tmp_path: Path) -> None:
    db = tmp_path / "zlops.db"
    url = _store(db)
    backup = tmp_path / "backup.db"
    # docs/store.md: the online backup
    with closing(sqlite3.connect(db)) as src, closing(sqlite3.connect(backup)) as dst:
        src.backup(dst)
    _damage_inner_page(db)
    cfg = _config(tmp_path, url)
    assert _zlops("store", "check", "--config", str(cfg)).returncode == 1
    db.write_bytes(backup.read_bytes())  # restore: copy the backup over the file, zlops stopped
    ok = _zlops("store", "check", "--config", str(cfg))
    assert ok.returncode == 0 and "PRAGMA integrity_check: ok" in ok.stdout and "schema at revision" in ok.stdout


@pytest.mark.slow  # two zlops processes, the second retrying a closed port until it gives up (~6 s)
@pytest.mark.postgres
def test_store_check_on_postgresql_connects_or_says_it_cannot_in_one_line(tmp_path: Path, pg_url: str) -> None:
    Store.open(pg_url).dispose()
    ok = _zlops("store", "check", "--config", str(_config(tmp_path, pg_url.replace("postgres@", "postgres:pw-x1@"))))
    assert ok.returncode == 0 and "connected (SELECT 1)" in ok.stdout and "postgres:***@" in ok.stdout, ok.stderr
    assert "pw-x1" not in ok.stdout
    closed = pg_url.replace(":5432/", ":1/")
    down = _zlops("store", "check", "--config", str(write_config(tmp_path / "down.yaml", fault_config(
        tmp_path / "home2", tmp_path / "up", tmp_path / "probe", database=closed))))
    last = down.stderr.strip().splitlines()[-1]  # after the retries' warnings
    assert down.returncode == 1 and last.startswith("zlops: database unreachable: ") and "Traceback" not in down.stderr
