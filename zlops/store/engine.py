"""Engine construction for the result store: one place that knows SQLite's quirks.

SQLite gets foreign keys (off by default), WAL (readers do not block the writer), a busy timeout
(concurrent Airflow workers wait instead of failing), and SQLAlchemy-emitted ``BEGIN`` in place of the
sqlite3 driver's legacy transaction control, so DDL and SELECTs are transactional too. A connection
whose execution options carry ``SQLITE_BEGIN_OPTION`` begins with that statement instead
(``BEGIN IMMEDIATE`` takes the write lock up front: a read-then-write transaction cannot then fail
with "database is locked" when another writer committed in between).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import JSON, Engine, Table, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError
from sqlalchemy.orm import Session

from zlops.errors import DatabaseUnavailable, StoreError
from zlops.redact import redact_url

if TYPE_CHECKING:  # the dialects' insert constructs are imported by the writers that use them
    from sqlalchemy.dialects import postgresql, sqlite

log = logging.getLogger(__name__)

#: Execution option naming the statement that begins a transaction on SQLite.
SQLITE_BEGIN_OPTION = "zlops_sqlite_begin"
SQLITE_BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10


def parse_url(url: str) -> URL:
    """The SQLAlchemy URL of ``url``; a StoreError that says what to write when it is malformed."""
    try:
        return make_url(url)
    except ArgumentError as exc:
        raise StoreError(
            f"store URL {url!r} is not a database URL; expected e.g. sqlite:////var/lib/zlops/zlops.db "
            "or postgresql+psycopg://user@host:5432/zlops") from exc


def create_store_engine(url: str, *, connect_timeout_s: int = CONNECT_TIMEOUT_S) -> Engine:
    """An engine for ``url`` set up for the store (see the module docstring); a server that does not
    answer a connect fails it after ``connect_timeout_s`` (unless the URL sets ``connect_timeout``)."""
    try:
        return _create_store_engine(url, connect_timeout_s)
    except (ImportError, NoSuchModuleError) as exc:
        shown = redact_url(url)
        raise DatabaseUnavailable(f"database unusable: {shown}: its driver is not installed ({exc}); zlops supports "
                                  "sqlite:///PATH and postgresql+psycopg://USER@HOST:PORT/DB") from exc


def _create_store_engine(url: str, connect_timeout_s: int) -> Engine:
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    if parsed.get_backend_name() != "postgresql":
        log.warning("store backend %s is untested; zlops supports sqlite and postgresql",
                    parsed.get_backend_name())
    # pre-ping: Airflow workers hold engines across long idle gaps that servers may cut, and a
    # terminated connection is replaced at checkout instead of failing the next statement;
    # a connect timeout: a host that drops packets fails (and is retried) instead of hanging the night
    connect_args = {} if "connect_timeout" in parsed.query else {"connect_timeout": connect_timeout_s}
    return create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)


def _sqlite_engine(url: URL) -> Engine:
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        folder = Path(database).expanduser().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            why = "a file is in the way" if isinstance(exc, (FileExistsError, NotADirectoryError)) else (
                exc.strerror or str(exc))
            shown = redact_url(url.render_as_string(hide_password=False))
            raise DatabaseUnavailable(f"database unusable: {shown}: cannot create its folder {folder} ({why})") from exc
    # pre-ping: a file deleted or made unreadable under a long-lived worker is noticed at checkout
    engine = create_engine(url, pool_pre_ping=True)
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # hand transaction control to SQLAlchemy (the "begin" hook below emits BEGIN itself)
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        _enable_wal(cursor)
    finally:
        cursor.close()


def _enable_wal(cursor: Any) -> None:
    # Switching a file to WAL needs a moment of exclusive access, and SQLite answers "database is
    # locked" at once instead of calling the busy handler; this only happens while the file is
    # new (WAL mode then persists), so a short retry loop bounded by the busy timeout is enough.
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _sqlite_on_begin(conn: Connection) -> None:
    conn.exec_driver_sql(conn.get_execution_options().get(SQLITE_BEGIN_OPTION, "BEGIN"))


def dialect_insert(session: Session, table: type[Any]) -> postgresql.Insert | sqlite.Insert:
    """An INSERT for ``table`` that supports ``on_conflict_do_*`` on the session's database.

    Both dialects spell upserts the same way (``ON CONFLICT (...) DO UPDATE/NOTHING``); this is the one
    place that picks the dialect's construct, so store writes stay idempotent on either database.
    """
    from sqlalchemy.dialects import postgresql, sqlite

    name = session.get_bind().dialect.name
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise StoreError(f"the store supports sqlite and postgresql, not {name}")


def bulk_insert(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``rows`` (dicts of ``table``'s column names) in the caller's transaction, fast at 10^4-10^5 rows.

    PostgreSQL (psycopg 3): one ``COPY ... FROM STDIN`` (JSON columns sent as their JSON text), several
    times faster than multi-row INSERTs whose every parameter goes through SQLAlchemy's processors;
    elsewhere one executemany. A row that breaks a constraint fails the whole statement either way
    (``IntegrityError``), so callers keep their all-or-nothing behaviour.
    """
    if not rows:
        return
    columns = list(rows[0])
    if conn.dialect.name != "postgresql" or conn.dialect.driver != "psycopg":
        conn.execute(table.insert(), list(rows))
        return
    import psycopg

    as_json = {name for name in columns if isinstance(table.c[name].type, JSON)}
    quote = conn.dialect.identifier_preparer.quote
    statement = f"COPY {quote(table.name)} ({', '.join(quote(name) for name in columns)}) FROM STDIN"
    try:
        with conn.connection.driver_connection.cursor() as cur, cur.copy(statement) as copy:
            for row in rows:
                copy.write_row([None if row[name] is None else json.dumps(row[name]) if name in as_json
                                else row[name] for name in columns])
    except psycopg.errors.IntegrityError as exc:  # as an INSERT would report it
        raise IntegrityError(statement, None, exc) from exc
