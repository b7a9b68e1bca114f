"""Named report queries: plain SQL files in ``sql/queries/`` that run unchanged on SQLite and
PostgreSQL, for dashboards and ad-hoc reports that want rows rather than model objects.

Each file starts with a comment naming its bind parameters (written ``:name`` in the SQL; never
in a comment, where ``text()`` would take them for parameters too). Values come back as the driver
returns them: SQLite gives timestamps as text and booleans as 0/1.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from zlops.errors import StoreError
from zlops.store.migrate import sql_dir

_NAME = re.compile(r"[a-z][a-z0-9_]*")


def queries_dir() -> Path:
    return sql_dir() / "queries"


def query_names() -> list[str]:
    """The names of the shipped queries (file names without ``.sql``), sorted."""
    return sorted(p.stem for p in queries_dir().glob("*.sql"))


def load_query(name: str) -> str:
    """The SQL text of the query ``name``; StoreError listing the valid names when unknown."""
    path = queries_dir() / f"{name}.sql"
    if not _NAME.fullmatch(name) or not path.is_file():
        raise StoreError(f"unknown report query {name!r}; known: {', '.join(query_names())}")
    return path.read_text(encoding="utf-8")


def run_query(conn: Connection | Session, name: str,
              params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Run the query ``name`` with ``params`` on ``conn``; one dict per row, keyed by column."""
    result = conn.execute(text(load_query(name)), dict(params or {}))
    return [dict(row) for row in result.mappings()]
