"""Schema migrations of the result store, driven through Alembic's API (no alembic.ini).

The migrations live in the repository's ``sql/`` folder, which the wheel ships as ``zlops/_sql``.
:func:`upgrade` runs every pending migration in ONE transaction that first takes a migration lock
(a PostgreSQL advisory lock; SQLite's write lock via ``BEGIN IMMEDIATE``), so two workers upgrading
at once serialise: the second finds the schema at head and does nothing.

A database already at the shipped head (every start of every command but the first after an
upgrade) is recognised without Alembic: :func:`shipped_head` reads the scripts' ``revision`` and
``down_revision`` lines, and one SELECT reads the database's. Importing Alembic (and through it
Mako and the migration scripts) costs more than the rest of ``zlops runs``.
"""

from __future__ import annotations

import functools
import logging
import re
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text

import zlops
from zlops.errors import StoreError
from zlops.store.engine import SQLITE_BEGIN_OPTION

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

#: Alembic's own table (the default ``version_table``; sql/env.py keeps it)
VERSION_TABLE = "alembic_version"
_REVISION = re.compile(r'^revision(?:: *str)? *= *"([^"\n]+)"\s*$', re.M)
_DOWN_REVISION = re.compile(r'^down_revision(?:: *[^=\n]+)? *= *(?:"([^"\n]+)"|None)\s*$', re.M)

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
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(sql_dir()))
    return config


def head_revision() -> str | None:
    """The newest revision the shipped migrations know of."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


@functools.lru_cache(maxsize=4)
def _shipped_head(versions: Path) -> str | None:
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in sorted(versions.glob("*.py")):
        text_ = script.read_text(encoding="utf-8")
        found, down = _REVISION.findall(text_), _DOWN_REVISION.findall(text_)
        if len(found) != 1 or len(down) != 1:  # a merge (a tuple of parents), or a layout not recognised
            return None
        revisions.add(found[0])
        if down[0]:
            parents.add(down[0])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def shipped_head() -> str | None:
    """The head revision of the shipped migrations, read from the scripts' ``revision`` and
    ``down_revision`` lines without importing Alembic or the scripts; None when the scripts are not one
    plain chain (Alembic then decides, as :func:`head_revision`)."""
    return _shipped_head(sql_dir() / "versions")


def at_shipped_head(engine: Engine) -> bool:
    """Whether the database is at :func:`shipped_head` (one SELECT, no Alembic). False when it cannot
    tell (no version table, no plain chain of scripts); a database fault propagates."""
    head = shipped_head()
    if head is None:
        return False
    with engine.connect() as conn:
        if not inspect(conn).has_table(VERSION_TABLE):
            return False
        return [tuple(r) for r in conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))] == [(head,)]


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at; None for a database never migrated."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database behind ``engine`` to ``revision`` under the migration lock.

    Idempotent: at head it only takes and releases the lock; at the shipped head it does not even
    import Alembic (:func:`at_shipped_head`).
    """
    if revision == "head" and at_shipped_head(engine):
        return
    from alembic import command
    from alembic.runtime.migration import MigrationContext

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
