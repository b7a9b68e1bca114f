"""The store's health, checked before a night writes anything: a damaged store ends the night in one
line that says what to do, never in a traceback, and never with more writes into a malformed file.

- SQLite: the file's 16-byte header must read ``SQLite format 3``; then ``PRAGMA quick_check`` (pages,
  b-trees, free lists: O(size), seconds for a store of a few GB) on a read-only connection, so the
  check itself never writes. ``zlops store check`` runs the thorough ``PRAGMA integrity_check``
  (also every index against its table).
- PostgreSQL: a connection and ``SELECT 1``, retried like every store call (the server itself
  guards its pages; its own checks are ``pg_amcheck``).

A damaged store raises :class:`~zlops.errors.StoreCorrupt`; docs/store.md says how to back up and
restore both stores.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text

from zlops.errors import StoreCorrupt
from zlops.redact import redact_url
from zlops.store.engine import parse_url

SQLITE_HEADER = b"SQLite format 3\x00"
#: how many of quick_check's problem lines a message quotes
SHOWN_PROBLEMS = 3


@dataclass(frozen=True)
class Health:
    """A store found healthy: what was checked, for ``zlops store check``."""

    url: str
    checked: str


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite store URL; None for another database or an in-memory one."""
    parsed = parse_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser()


def what_to_do(url: str, path: Path | None) -> str:
    """The sentence every corruption message ends with."""
    where = f"copy your latest backup over {path} (with zlops stopped)" if path else "restore your latest backup"
    return (f"nothing was written to it. Restore it from a backup: {where}, then run `zlops store check` "
            "(docs/store.md)")


def check_sqlite(url: str, *, thorough: bool = False) -> Health:
    """Header, then ``quick_check`` (``integrity_check`` when ``thorough``) of a SQLite store, read-only;
    StoreCorrupt naming the file and the first problems. A file that does not exist yet (or is empty)
    is healthy: the night creates it."""
    path = sqlite_path(url)
    shown = redact_url(url)
    if path is None or not path.is_file() or path.stat().st_size == 0:  # a folder in the way: the engine says so
        return Health(shown, "nothing to check yet (a new store)")
    try:
        with path.open("rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreCorrupt(f"store unreadable: {shown}: cannot read {path}: {exc.strerror or exc}") from exc
    if header != SQLITE_HEADER:
        raise StoreCorrupt(f"store corrupt: {shown}: {path} is not an SQLite database (its header is damaged); "
                           + what_to_do(url, path))
    pragma = "integrity_check" if thorough else "quick_check"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            rows = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}").fetchall()]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        if "locked" in str(exc):
            raise  # a writer holds it: not a corruption
        raise StoreCorrupt(f"store corrupt: {shown}: PRAGMA {pragma} of {path}: {exc}; "
                           + what_to_do(url, path)) from exc
    if rows != ["ok"]:
        more = f" (and {len(rows) - SHOWN_PROBLEMS} more)" if len(rows) > SHOWN_PROBLEMS else ""
        raise StoreCorrupt(f"store corrupt: {shown}: PRAGMA {pragma} of {path} found {len(rows)} problem(s): "
                           f"{'; '.join(rows[:SHOWN_PROBLEMS])}{more}; " + what_to_do(url, path))
    return Health(shown, f"PRAGMA {pragma}: ok ({path.stat().st_size} bytes)")


def check_store(store: object, *, thorough: bool = False) -> Health:
    """The health of an opened :class:`~zlops.store.Store` (not yet migrated): SQLite by
    :func:`check_sqlite`, any other database by a connection and ``SELECT 1`` (retried; an unreachable
    server raises DatabaseUnavailable in one line)."""
    url: str = store.url  # type: ignore[attr-defined]
    if sqlite_path(url) is not None or parse_url(url).get_backend_name() == "sqlite":
        return check_sqlite(url, thorough=thorough)

    def ping() -> None:
        with store.engine.connect() as conn:  # type: ignore[attr-defined]
            conn.execute(text("SELECT 1"))

    store._retrying(ping, "connectivity check")  # type: ignore[attr-defined]
    return Health(redact_url(url), "connected (SELECT 1)")
