"""Database faults end in one clear line, and transient ones are retried (issue 14).

Real faults only: a closed TCP port, a name that does not resolve, SQLite paths that cannot be
opened, and ``pg_terminate_backend`` of the store's own PostgreSQL connection.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import yaml
from sqlalchemy import text

from zlops.cli import app as cli
from zlops.errors import DatabaseUnavailable
from zlops.model import RunRecord, RunStatus
from zlops.store import Store
from zlops.store.retry import RetryPolicy


def pg_admin_connect() -> psycopg.Connection:
    """An autocommit admin connection to the test server (the pg_url fixture's, tests/conftest.py)."""
    return psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres", autocommit=True,
                           connect_timeout=5)

REPO = Path(__file__).resolve().parents[2]
FAST = RetryPolicy(total_s=0.3, first_s=0.05, max_s=0.1)


def _closed_port() -> int:
    with socket.socket() as s:  # bound, then closed: nothing listens there now
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(tmp_path: Path, database: str) -> Path:
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump({
        "home": str(tmp_path / "home"), "database": database, "database_retry_s": 0.5,
        "pools": {"local": {"backend": "cpu", "devices": [0]}},
        "suites": {"fake": {"repo": str(tmp_path / "nowhere"), "command": ["python", "bench.py"],
                            "format": "zlops-json", "pools": ["local"]}}}))
    return path


def _zlops(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZLOPS_")}
    return subprocess.run([sys.executable, "-m", "zlops.cli", *args], capture_output=True, text=True, env=env,
                          timeout=60, cwd=REPO)


def _one_line(stderr: str) -> str:
    """The single ``zlops:`` line of stderr (retry warnings are log lines, not part of the message)."""
    assert "Traceback" not in stderr, stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("zlops:")]
    assert len(lines) == 1, stderr
    assert stderr.rstrip().endswith(lines[0]), "the message is the last thing printed"
    return lines[0]


@pytest.mark.slow
def test_closed_port_is_one_line_with_the_password_redacted(tmp_path: Path) -> None:
    port = _closed_port()
    url = f"postgresql+psycopg://zlops:hunter2@127.0.0.1:{port}/zlops"
    done = _zlops("runs", "--config", str(_config(tmp_path, url)))
    assert done.returncode == cli.EXIT_ERROR
    line = _one_line(done.stderr)
    assert line == (f"zlops: database unreachable: postgresql+psycopg://zlops:***@127.0.0.1:{port}/zlops: "
                    "connection refused")
    assert "hunter2" not in done.stderr + done.stdout
    assert "retry 1 of" in done.stderr  # a refused connect is transient: it was retried before giving up
    verbose = _zlops("-v", "runs", "--config", str(_config(tmp_path, url)))
    assert verbose.returncode == cli.EXIT_ERROR
    assert "Traceback" in verbose.stderr and "psycopg.OperationalError" in verbose.stderr
    assert "hunter2" not in verbose.stderr


@pytest.mark.parametrize("url_of, reason", [
    (lambda tmp: "postgresql+psycopg://zlops:pw@no-such-host.invalid:5432/zlops", "unknown host"),
    (lambda tmp: f"sqlite:///{tmp / 'a-file'}/zlops.db", "cannot create its folder"),
    (lambda tmp: f"sqlite:///{tmp / 'a-folder'}", "cannot open the SQLite file"),
    (lambda tmp: "postgresql+nosuchdriver://zlops:pw@db:5432/zlops", "its driver is not installed"),
    # opened read-only by SQLite itself: unwritable even for root, who ignores file modes
    (lambda tmp: f"sqlite:///file:{tmp / 'ro.db'}?mode=ro&uri=true", "the SQLite file is read-only"),
])
def test_permanent_faults_are_one_line_and_not_retried(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        url_of: object, reason: str) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "a-folder").mkdir()
    made = sqlite3.connect(tmp_path / "ro.db")
    made.execute("CREATE TABLE t (a)")
    made.commit()
    made.close()
    url = url_of(tmp_path)  # type: ignore[operator]
    code = cli.main(["--plain", "runs", "--config", str(_config(tmp_path, url))])
    err = capsys.readouterr().err
    assert code == cli.EXIT_ERROR
    line = _one_line(err)
    assert reason in line and line.startswith("zlops: database un")
    assert "pw@" not in err
    assert "retry" not in err  # a permanent fault is not waited for


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_read_only_sqlite_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "ro" / "zlops.db"
    Store.open(f"sqlite:///{db}").dispose()
    os.chmod(db, 0o444)
    os.chmod(db.parent, 0o555)
    try:
        code = cli.main(["--plain", "db", "upgrade", "--config", str(_config(tmp_path, f"sqlite:///{db}"))])
    finally:
        os.chmod(db.parent, 0o755)
    assert code == cli.EXIT_ERROR
    line = _one_line(capsys.readouterr().err)
    assert "read-only" in line or "cannot open" in line


@pytest.mark.postgres
def test_a_terminated_connection_is_retried_and_the_write_succeeds(pg_url: str) -> None:
    store = Store.open(pg_url, retry=FAST)
    calls = []

    def write_after_losing_the_connection(session: object) -> None:
        calls.append(1)
        if len(calls) == 1:  # the server terminates this very connection in the middle of the unit of work
            session.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))  # type: ignore[attr-defined]
        from zlops.store import runs

        runs.upsert_run(session, RunRecord(run_key="nightly:s:1", kind="nightly", suite="s", sha="a" * 40,
                                           branch="main", status=RunStatus.RUNNING))

    store.unit_of_work(write_after_losing_the_connection)
    assert len(calls) == 2
    assert store.get_run("nightly:s:1") is not None
    store.dispose()


@pytest.mark.postgres
def test_connections_terminated_between_calls_are_replaced(pg_url: str) -> None:
    store = Store.open(pg_url, retry=FAST)
    store.upsert_run(RunRecord(run_key="nightly:s:1", kind="nightly", suite="s", sha="a" * 40, branch="main",
                               status=RunStatus.RUNNING))
    name = pg_url.rsplit("/", 1)[1]
    with pg_admin_connect() as admin:
        killed = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s "
                               "AND pid <> pg_backend_pid()", (name,)).fetchone()
    assert killed and killed[0] >= 1  # the store's pooled connection was there, and is gone
    store.set_run_status("nightly:s:1", RunStatus.DONE)
    assert store.get_run("nightly:s:1").status is RunStatus.DONE  # type: ignore[union-attr]
    store.dispose()


@pytest.mark.postgres
def test_a_database_that_stays_away_raises_one_clear_error(pg_url: str) -> None:
    store = Store.open(pg_url, retry=FAST)
    name = pg_url.rsplit("/", 1)[1]
    with pg_admin_connect() as admin:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        try:
            with pytest.raises(DatabaseUnavailable, match=r"^database unreachable: postgresql\+psycopg://"
                                                             r".*: the database refuses connections$") as err:
                store.get_run("nightly:s:1")
            assert err.value.transient
        finally:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
    assert store.get_run("nightly:s:1") is None  # back: the same store works again
    store.dispose()


def test_retry_policy_is_bounded() -> None:
    delays = RetryPolicy(total_s=10, first_s=0.5, max_s=4).delays()
    assert delays == [0.5, 1.0, 2.0, 4.0] and sum(delays) <= 10
    assert RetryPolicy(total_s=0).delays() == []
    with pytest.raises(ValueError, match="RetryPolicy"):
        RetryPolicy(first_s=0)


@pytest.mark.postgres
def test_a_deadlock_is_retried(pg_url: str) -> None:
    """Two units of work locking two runs in opposite order: PostgreSQL kills one, which is run again."""
    import threading

    from zlops.store import runs

    store = Store.open(pg_url, retry=RetryPolicy(total_s=5, first_s=0.05, max_s=0.2))
    for key in ("nightly:s:a", "nightly:s:b"):
        store.upsert_run(RunRecord(run_key=key, kind="nightly", suite="s", sha="a" * 40, branch="main",
                                   status=RunStatus.RUNNING))
    barrier = threading.Barrier(2, timeout=10)
    attempts: list[str] = []

    def lock_both(first: str, second: str) -> None:
        def work(session: object) -> None:
            attempts.append(first)
            runs.set_run_status(session, first, RunStatus.DONE)  # type: ignore[arg-type]
            if attempts.count(first) == 1:
                barrier.wait()  # both hold their first row: the second update deadlocks one of them
            runs.set_run_status(session, second, RunStatus.DONE)  # type: ignore[arg-type]

        store.unit_of_work(work)

    threads = [threading.Thread(target=lock_both, args=pair) for pair in
               (("nightly:s:a", "nightly:s:b"), ("nightly:s:b", "nightly:s:a"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(attempts) == 3  # one of the two ran twice
    assert all(store.get_run(k).status is RunStatus.DONE for k in ("nightly:s:a", "nightly:s:b"))  # type: ignore[union-attr]
    store.dispose()


@pytest.mark.postgres
def test_a_connection_terminated_during_start_up_is_retried(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The schema upgrade at start-up loses its connection once (a server restart, a failover)."""
    from zlops.store import migrate

    real_upgrade = migrate.upgrade
    calls = []

    def upgrade_that_loses_its_connection(engine: object, revision: str = "head") -> None:
        calls.append(1)
        if len(calls) == 1:
            with engine.connect() as conn:  # type: ignore[attr-defined]
                conn.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))
        real_upgrade(engine, revision)  # type: ignore[arg-type]

    monkeypatch.setattr(migrate, "upgrade", upgrade_that_loses_its_connection)
    store = Store.open(pg_url, retry=FAST)
    assert len(calls) == 2 and store.current_revision() == migrate.head_revision()
    store.dispose()
