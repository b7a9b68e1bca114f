"""Alembic environment of the zlops result store.

zlops drives Alembic programmatically (:mod:`zlops.store.migrate`): the caller passes an open
connection, already inside the transaction that holds the migration lock, through
``config.attributes["connection"]``. For ad-hoc use (``alembic -x url=... upgrade head`` with a
config whose ``script_location`` points here) a URL is accepted instead. Logging is left to the
application: this file never configures it.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from zlops.store.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead
        render_as_batch=connection.dialect.name == "sqlite",
    )


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url")
    if not url:
        raise RuntimeError("zlops migrations need a connection in config.attributes['connection'], "
                           "or a URL: -x url=... or sqlalchemy.url in the config")
    return url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(_url())
    try:
        with engine.connect() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
