"""Databases built once per test session and copied for every test that starts from that state.

Migrating the schema costs ~0.3 s a test on PostgreSQL and ~0.1 s on SQLite, storing a week of nights
(tests/triage_nights.py) ~0.4-1 s; copying the result costs milliseconds: the SQLite file is copied,
and a PostgreSQL database is created from the template (``CREATE DATABASE x TEMPLATE t``, a block copy
inside the real server). Every test still gets its own database (its own file, its own database on
the server), so no test sees another's writes and the order of tests does not matter. The templates
are built by the same code the tests would otherwise run per test (``Store.open``, the store API).

The session fixtures are in tests/conftest.py: ``db_templates`` (a :class:`Templates`) and
``pg_databases`` (a :class:`PgDatabases`, per test; ``pg_url`` is its empty database).
"""

from __future__ import annotations

import os
import secrets
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import psycopg
import pytest
from psycopg import sql

PG_HOST = "127.0.0.1"
PG_PORT = 5432
PG_USER = "postgres"
BACKENDS = ("sqlite", "postgresql")

M = TypeVar("M")


def pg_admin_connect() -> psycopg.Connection[Any]:
    """An autocommit connection to the admin database; fails (or skips) the test when unreachable."""
    try:
        return psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres",
                               autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        reason = (f"PostgreSQL is not reachable at {PG_USER}@{PG_HOST}:{PG_PORT} ({exc}). "
                  "Start the server, or set ZLOPS_SKIP_POSTGRES=1 to skip the postgres tests.")
        if os.environ.get("ZLOPS_SKIP_POSTGRES") == "1":
            pytest.skip(reason)
        pytest.fail(reason, pytrace=False)


def pg_database_url(name: str) -> str:
    return f"postgresql+psycopg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"


def _pg_drop(admin: psycopg.Connection[Any], name: str) -> None:
    # engines should be disposed by now; terminate stragglers so DROP cannot hang
    admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                  "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


class PgDatabases:
    """The PostgreSQL databases of one test, each created empty or from a template and dropped after it."""

    def __init__(self) -> None:
        self._admin: psycopg.Connection[Any] | None = None
        self.names: list[str] = []

    def create(self, template: str | None = None) -> str:
        """The URL of a new database ``zlops_test_<hex>``: empty, or a copy of the database ``template``."""
        if self._admin is None:
            self._admin = pg_admin_connect()
        name = f"zlops_test_{secrets.token_hex(6)}"
        query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            query = sql.SQL("{} TEMPLATE {}").format(query, sql.Identifier(template))
        self._admin.execute(query)
        self.names.append(name)
        return pg_database_url(name)

    def drop_all(self) -> None:
        if self._admin is None:
            return
        with self._admin as admin:
            for name in self.names:
                _pg_drop(admin, name)
        self._admin = None
        self.names.clear()


@dataclass(frozen=True)
class Template(Generic[M]):
    """A database built once: ``source`` is its SQLite file or its PostgreSQL database's name; ``meta``
    what the builder returned (the ids of the rows it wrote, say)."""

    backend: str
    source: str
    meta: M


class Templates:
    """The session's templates, by key and backend; built on first use, PostgreSQL ones dropped at the end."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._built: dict[tuple[str, str], Template[Any]] = {}
        self._pg_names: list[str] = []

    def get(self, key: str, backend: str, build: Callable[[str, Path], M]) -> Template[M]:
        """The template ``key`` on ``backend``; ``build(url, folder)`` fills the empty database at ``url``
        (``folder``: an empty folder of its own, for a config or files), disposes every engine it opened
        and returns the template's ``meta``."""
        if backend not in BACKENDS:
            raise ValueError(f"backend {backend!r}: expected one of {BACKENDS}")
        found = self._built.get((key, backend))
        if found is not None:
            return found
        folder = self.root / f"{key}-{backend}"
        shutil.rmtree(folder, ignore_errors=True)  # what an earlier attempt left (a skip, a failed build)
        folder.mkdir(parents=True)
        if backend == "sqlite":
            path = folder / "template.db"
            meta = build(f"sqlite:///{path}", folder)
            with closing(sqlite3.connect(path)) as conn:  # every page into the main file, so one copy is whole
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            template: Template[M] = Template(backend, str(path), meta)
        else:
            name = f"zlops_test_tmpl_{secrets.token_hex(6)}"
            with pg_admin_connect() as admin:
                admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                self._pg_names.append(name)
                meta = build(pg_database_url(name), folder)
                # a template cannot be copied while anyone is connected to it (a cached engine, say)
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            template = Template(backend, name, meta)
        self._built[(key, backend)] = template
        return template

    def copy(self, template: Template[M], *, sqlite_path: Path, pg: PgDatabases | None) -> str:
        """The URL of a new copy of ``template``: the SQLite file copied to ``sqlite_path`` (its folder
        is created), or a new PostgreSQL database of ``pg``, dropped after the test."""
        if template.backend == "sqlite":
            sqlite_path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(template.source, sqlite_path)
            return f"sqlite:///{sqlite_path}"
        if pg is None:
            raise ValueError("a PostgreSQL template is copied into a test's pg_databases")
        return pg.create(template=template.source)

    def close(self) -> None:
        if not self._pg_names:
            return
        with pg_admin_connect() as admin:
            for name in self._pg_names:
                _pg_drop(admin, name)
        self._pg_names.clear()


def migrated(url: str, folder: Path) -> None:
    """A builder: the schema at head, nothing stored."""
    from zlops.store import Store

    Store.open(url).dispose()
