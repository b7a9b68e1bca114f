"""Fixtures of the store tests: every behavioural test runs on SQLite AND on a real PostgreSQL.

PostgreSQL: the server on 127.0.0.1:5432 (trust auth, user ``postgres``); each test gets a fresh
database ``zlops_test_<hex>`` that is dropped afterwards. An unreachable server fails the postgres
tests with the reason, unless ``ZLOPS_SKIP_POSTGRES=1`` is set (then they are skipped).

``db_url`` is an empty database (the migration tests start there); ``store`` opens a copy of a database
migrated once per session (tests/db_templates.py), so a test pays a file copy or a ``CREATE DATABASE ...
TEMPLATE`` instead of running every migration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from db_templates import Templates, migrated

from zlops.model import CaseResult, RunRecord, RunStatus, ShardOutcome, ShardStatus
from zlops.store import Store

T0 = datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """The backend of this run of the test: ``sqlite`` or ``postgres``."""
    name: str = request.param
    return name


@pytest.fixture
def db_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database on each backend; the SQLite file's folder does not exist yet."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'state' / 'zlops.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def stored(backend: str, request: pytest.FixtureRequest, tmp_path: Path,
           db_templates: Templates) -> Iterator[Callable[..., Store]]:
    """A factory: ``stored(key, fill)`` opens this test's own copy of a migrated store that ``fill(store)``
    wrote into once per session (``key`` names that state; no ``fill``: the schema alone), at the SQLite
    path ``db_url`` would name or in a PostgreSQL database of its own."""
    opened: list[Store] = []

    def open_copy(key: str, fill: Callable[[Store], None] | None = None) -> Store:
        def build(url: str, folder: Path) -> None:
            migrated(url, folder)
            if fill is not None:
                s = Store.open(url)
                try:
                    fill(s)
                finally:
                    s.dispose()

        template = db_templates.get(key, "sqlite" if backend == "sqlite" else "postgresql", build)
        pg = None if backend == "sqlite" else request.getfixturevalue("pg_databases")
        s = Store.open(db_templates.copy(template, sqlite_path=tmp_path / "state" / "zlops.db", pg=pg))
        opened.append(s)
        return s

    try:
        yield open_copy
    finally:
        for s in opened:
            s.dispose()


@pytest.fixture
def store(stored: Callable[..., Store]) -> Store:
    """A migrated store on each backend (a copy of the schema migrated once per session)."""
    return stored("migrated")


class Make:
    """Builders of domain values with sensible defaults, so tests state only what matters."""

    @staticmethod
    def sha(n: int) -> str:
        return f"{n:040x}"

    @staticmethod
    def when(days: float) -> datetime:
        return T0 + timedelta(days=days)

    @staticmethod
    def run(key: str, *, sha: int = 1, suite: str = "ops", kind: str = "nightly",
            accepted: bool = False, day: float | None = 0, finished_day: float | None = None,
            status: RunStatus = RunStatus.RUNNING, meta: dict[str, Any] | None = None) -> RunRecord:
        return RunRecord(run_key=key, kind=kind, suite=suite, sha=Make.sha(sha), branch="main",
                         status=status, accepted=accepted,
                         started_at=None if day is None else Make.when(day),
                         finished_at=None if finished_day is None else Make.when(finished_day),
                         meta=meta or {})

    @staticmethod
    def shard(pool: str = "npu", device: int = 0, status: ShardStatus = ShardStatus.OK,
              **kw: Any) -> ShardOutcome:
        fields: dict[str, Any] = {"backend": "cpu", "artifact_dir": Path(f"/tmp/art/{pool}/{device}"),
                                  "exit_code": 0 if status is ShardStatus.OK else 1,
                                  "started_at": T0, "ended_at": T0 + timedelta(minutes=5)}
        fields.update(kw)
        return ShardOutcome(pool=pool, device=device, status=status, **fields)

    @staticmethod
    def result(case: str = "add[f32,1024]", metric: str = "latency",
               samples: Sequence[float] = (1.0, 2.0, 3.0), unit: str = "us",
               **params: Any) -> CaseResult:
        return CaseResult(case=case, metric=metric, unit=unit, lower_is_better=True,
                          samples=tuple(samples), params=params)


@pytest.fixture
def make() -> type[Make]:
    return Make
