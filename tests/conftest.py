"""Session-wide test setup.

Airflow reads its environment at import time, so AIRFLOW_HOME and friends are set here, before
any test module can import airflow (otherwise it would create ~/airflow); nothing imported above
imports it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from db_templates import PgDatabases, Templates, migrated

REPO = Path(__file__).resolve().parents[1]
_AF_HOME = Path(tempfile.mkdtemp(prefix="zlops-af-"))
os.environ.update(
    AIRFLOW_HOME=str(_AF_HOME),
    AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"),
    AIRFLOW__CORE__PLUGINS_FOLDER=str(REPO / "plugins"),
    AIRFLOW__CORE__LOAD_EXAMPLES="False",
    AIRFLOW__CORE__UNIT_TEST_MODE="True",
    AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{_AF_HOME}/airflow.db",
)
os.environ.pop("ZLOPS_CONFIG", None)
# device leases are host-wide by default (/var/lock/zlops): one test session gets its own folder,
# so parallel sessions on one machine do not queue on "cpu:0"; tests of the default unset it
os.environ["ZLOPS_LOCKS_DIR"] = tempfile.mkdtemp(prefix="zlops-locks-")
os.environ.pop("SLACK_BOT_TOKEN", None)


@pytest.fixture(scope="session")
def db_templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Templates]:
    """Databases built once per session and copied per test (tests/db_templates.py)."""
    templates = Templates(tmp_path_factory.mktemp("db-templates"))
    try:
        yield templates
    finally:
        templates.close()


@pytest.fixture
def pg_databases() -> Iterator[PgDatabases]:
    """This test's PostgreSQL databases (empty, or copies of a template), dropped after the test."""
    databases = PgDatabases()
    try:
        yield databases
    finally:
        databases.drop_all()


@pytest.fixture
def pg_url(pg_databases: PgDatabases) -> str:
    """The URL of a fresh, empty PostgreSQL database, dropped after the test."""
    return pg_databases.create()


@pytest.fixture
def migrated_sqlite_url(tmp_path: Path, db_templates: Templates) -> str:
    """The URL of ``tmp_path / "zlops.db"``: this test's copy of a SQLite store migrated once per session."""
    template = db_templates.get("migrated", "sqlite", migrated)
    return db_templates.copy(template, sqlite_path=tmp_path / "zlops.db", pg=None)


# --- every core at once (pytest-xdist), and the load-sensitive tests alone --------------------------------------
# scripts/test.sh runs the suite on every core (`-n auto --dist loadfile`: a file's tests stay on one worker, so a
# module-scoped fixture, e.g. a hold-out's replayed nights, is built once). A test marked ``serial`` judges time on
# this machine: a replay at a scaled time (its A/B fits as many pairs into its scaled budget as the runs' real
# length allows: a loaded host fitted 4 where the record has 5), the demo's real timings, a real CPU hog beside the
# contention gate. While one runs, no other test runs on any worker: the other workers wait for it to end, and it
# waits for the tests already running to end (a readers-writer lock on files shared by the session's workers, with
# a turnstile so that a waiting serial test is not overtaken by the next tests of the other workers). Without xdist
# (one process) nothing changes. Marked automatically: every test of a module that replays recorded processes at a
# scaled time (it defines ``TIME_SCALE`` or imports tests/flaggems_holdout.py or tests/flaggems_replay.py) and every
# ``timing.real_timings`` test; by hand: ``@pytest.mark.serial``.

_REPLAY_HELPERS = {"flaggems_holdout", "flaggems_replay"}


def _replays_at_scaled_time(module: object) -> bool:
    names = vars(module) if module is not None else {}
    return "TIME_SCALE" in names or any(getattr(v, "__module__", None) in _REPLAY_HELPERS for v in names.values())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("serial") is None and _replays_at_scaled_time(getattr(item, "module", None)):
            item.add_marker(pytest.mark.serial)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _longest_files_first(items)


def _longest_files_first(items: list[pytest.Item]) -> None:
    """Under xdist (every worker collects the same order; ``--dist loadfile`` hands files out in it): the serial
    files first (the other workers wait while one runs, wherever it is), then the files with the most slow tests,
    the fast files last, so that the session ends on short files on every worker instead of one worker's long file
    (longest first, as the partition of a night's cases does). A file's tests keep their order, side by side."""
    first: dict[Path, int] = {}
    serial: dict[Path, bool] = {}
    slow: dict[Path, int] = {}
    for i, item in enumerate(items):
        first.setdefault(item.path, i)
        serial[item.path] = serial.get(item.path, False) or item.get_closest_marker("serial") is not None
        slow[item.path] = slow.get(item.path, 0) + (item.get_closest_marker("slow") is not None)
    order = {i: n for n, i in enumerate(items)}
    items.sort(key=lambda it: (not serial[it.path], -slow[it.path], first[it.path], order[it]))


def _placeholder_png() -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b""))


@pytest.fixture(autouse=True, scope="module")
def _replays_draw_placeholder_trends(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module that replays recorded processes (above) checks what the nights decided: verdicts, A/Bs, alerts,
    kernels, never a figure. Each night's report still runs whole (tables, alerts, Slack payload, every figure file
    at its path), but a series' trend is a 1x1 placeholder PNG instead of a matplotlib drawing: the trends were half
    of a replay's set-up (hold-out 6: 41 of 82 s, 64 trends at ~0.65 s). The report runs after the night's A/B, so
    no A/B's runs or budget see the difference. The trends themselves are tested in tests/report/."""
    if not _replays_at_scaled_time(getattr(request, "module", None)):
        yield
        return
    import zlops.report.plots

    png = _placeholder_png()

    def placeholder_trend(history: object, comparison: object, out_path: Path, **_drawing: object) -> Path:
        out_path.write_bytes(png)
        return out_path

    patch = pytest.MonkeyPatch()
    patch.setattr(zlops.report.plots, "trend_plot", placeholder_trend)
    try:
        yield
    finally:
        patch.undo()


def _serial_dir() -> Path | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run or not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    folder = Path(tempfile.gettempdir()) / f"zlops-serial-{run}"
    folder.mkdir(exist_ok=True)
    return folder


class _Turns:
    """The worker's hold on the session's readers-writer lock: shared for a test, exclusive for a serial one,
    kept exclusive across the consecutive serial tests of one file (its module fixtures' set-up and teardown
    included)."""

    def __init__(self, folder: Path) -> None:
        import fcntl

        self.fcntl = fcntl
        self.gate = open(folder / "gate", "a+")   # held for the session
        self.main = open(folder / "main", "a+")
        self.held: str | None = None

    def take(self, exclusive: bool) -> None:
        want = "ex" if exclusive else "sh"
        if self.held == want:
            return
        self.release()
        f = self.fcntl
        if exclusive:
            f.flock(self.gate, f.LOCK_EX)   # the other workers' next tests wait at the turnstile from now on
            f.flock(self.main, f.LOCK_EX)   # and the tests they are running end first
        else:
            f.flock(self.gate, f.LOCK_SH)   # not while a serial test runs or waits
            f.flock(self.main, f.LOCK_SH)
            f.flock(self.gate, f.LOCK_UN)
        self.held = want

    def release(self) -> None:
        if self.held is not None:
            self.fcntl.flock(self.main, self.fcntl.LOCK_UN)
            self.fcntl.flock(self.gate, self.fcntl.LOCK_UN)
            self.held = None


_TURNS: _Turns | None = None


def _serial(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("serial") is not None


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _TURNS
    folder = _serial_dir()
    if folder is None:
        yield
        return
    if _TURNS is None:
        _TURNS = _Turns(folder)
    exclusive = _serial(item)
    _TURNS.take(exclusive)
    try:
        yield
    finally:
        # a serial file keeps the host to itself until its last test (and its module fixtures' teardown) ends
        if not (exclusive and _serial(nextitem) and nextitem is not None and nextitem.path == item.path):
            _TURNS.release()
