"""Schema migrations of the result store, driven through Alembic's API (no alembic.ini).

The migrations live in the repository's ``sql/`` folder, which the wheel ships as ``zlops/_sql``.
:func:`upgrade` runs every pending migration in ONE transaction that first takes a migration lock
(a PostgreSQL advisory lock; SQLite's write lock via ``BEGIN IMMEDIATE``), so two workers upgrading
at once serialise: the second finds the schema at head and does nothing.
"""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

import zlops
from zlops.errors import StoreError
from zlops.store.engine import SQLITE_BEGIN_OPTION

log = logging.getLogger(__name__)

#: Key of the PostgreSQL advisory lock held while migrating (any constant; this spells "zlops").
PG_MIGRATION_LOCK = 0x7A6C6F7073


def sql_dir() -> Path:
    """The folder holding ``env.py``, ``versions/`` and ``queries/``.

    ``zlops/_sql`` inside an installed wheel; the repository's ``sql/`` in an editable checkout.
    """
    packaged = resources.files("zlops") / "_sql"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(zlops.__file__).resolve().parent.parent / "sql"
    if checkout.is_dir():
        return checkout
    raise StoreError(f"zlops migrations not found: neither {packaged} (installed wheel) nor "
                     f"{checkout} (source checkout) exists; reinstall zlops")


def alembic_config() -> Config:
    """An Alembic config pointing at the migrations; no ini file is read or needed."""
    config = Config()
    config.set_main_option("script_location", str(sql_dir()))
    return config


def head_revision() -> str | None:
    """The newest revision the shipped migrations know of."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at; None for a database never migrated."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database behind ``engine`` to ``revision`` under the migration lock.

    Idempotent: at head it only takes and releases the lock.
    """
    config = alembic_config()
    with engine.connect() as conn:
        conn = conn.execution_options(**{SQLITE_BEGIN_OPTION: "BEGIN IMMEDIATE"})
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_MIGRATION_LOCK})
            before = MigrationContext.configure(conn).get_current_revision()
            config.attributes["connection"] = conn
            command.upgrade(config, revision)
            after = MigrationContext.configure(conn).get_current_revision()
    if before != after:
        log.info("store schema migrated from %s to %s", before or "<empty>", after)
