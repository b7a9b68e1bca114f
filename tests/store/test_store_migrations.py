"""Migrations: to head, idempotent, concurrent, reversible, and in step with the models."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, inspect, text

from zlops.store import Store
from zlops.store.migrate import alembic_config, head_revision, sql_dir
from zlops.store.models import Base

TABLES = {"runs", "shards", "results", "comparisons", "notifications", "alerts", "alert_events", "series_points"}


HEAD = "0004"  # the latest migration; bump with every new sql/versions file

def _diffs(store: Store, metadata: MetaData) -> list[object]:
    with store.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(ctx, metadata))


def test_migrations_folder_is_found() -> None:
    folder = sql_dir()
    assert (folder / "env.py").is_file()
    assert (folder / "versions" / "0001_initial.py").is_file()
    assert head_revision() == HEAD


def test_open_migrates_to_head_and_upgrade_is_idempotent(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        assert store.current_revision() == HEAD
        assert TABLES <= set(inspect(store.engine).get_table_names())
        store.upgrade()
        store.upgrade()
        assert store.current_revision() == HEAD
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).all() == [(HEAD,)]
    finally:
        store.dispose()


def test_open_without_migrate_leaves_database_alone(db_url: str) -> None:
    store = Store.open(db_url, migrate=False)
    try:
        assert store.current_revision() is None
        assert not TABLES & set(inspect(store.engine).get_table_names())
        store.upgrade()
        assert store.current_revision() == HEAD
    finally:
        store.dispose()


def test_concurrent_upgrades_serialise(db_url: str) -> None:
    stores = [Store.open(db_url, migrate=False) for _ in range(2)]
    barrier = threading.Barrier(len(stores))

    def upgrade(s: Store) -> None:
        barrier.wait()
        s.upgrade()

    try:
        with ThreadPoolExecutor(len(stores)) as pool:
            for future in [pool.submit(upgrade, s) for s in stores]:
                future.result(timeout=60)  # re-raises a worker's exception here
        assert [s.current_revision() for s in stores] == [HEAD, HEAD]
    finally:
        for s in stores:
            s.dispose()


def test_migrated_schema_matches_models(store: Store) -> None:
    assert _diffs(store, Base.metadata) == []


def test_schema_comparison_detects_drift(store: Store) -> None:
    # guards the test above: the comparison must be able to see a difference at all
    drifted = MetaData(naming_convention=Base.metadata.naming_convention)
    for table in Base.metadata.sorted_tables:
        table.to_metadata(drifted)
    drifted.tables["runs"].append_column(Column("extra", Integer, nullable=True))
    diffs = _diffs(store, drifted)
    assert [(d[0], d[3].name) for d in diffs if isinstance(d, tuple)] == [("add_column", "extra")]


def test_downgrade_to_base_and_back(store: Store) -> None:
    config = alembic_config()
    with store.engine.connect() as conn, conn.begin():
        config.attributes["connection"] = conn
        command.downgrade(config, "base")
    assert not TABLES & set(inspect(store.engine).get_table_names())
    store.upgrade()
    assert store.current_revision() == HEAD
    assert _diffs(store, Base.metadata) == []


def test_sqlite_connection_settings(tmp_path: Path) -> None:
    db = tmp_path / "not" / "yet" / "there.db"
    store = Store.open(f"sqlite:///{db}")
    try:
        assert db.is_file()
        with store.engine.connect() as conn:
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000
    finally:
        store.dispose()


def test_repr_hides_password() -> None:
    store = Store.open("postgresql+psycopg://zl:s3cret@db.example:5432/zlops", migrate=False)
    try:
        assert "s3cret" not in repr(store)
        assert "db.example" in repr(store)
    finally:
        store.dispose()


@pytest.mark.postgres
def test_postgres_server_reachable() -> None:
    # the one test that FAILS (the others error in setup) when the server is down and
    # ZLOPS_SKIP_POSTGRES is unset; conftest's fixtures give the same message
    if os.environ.get("ZLOPS_SKIP_POSTGRES") == "1":
        pytest.skip("ZLOPS_SKIP_POSTGRES=1")
    try:
        with psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres",
                             connect_timeout=5) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is not reachable at postgres@127.0.0.1:5432 ({exc}); start it, "
                    "or set ZLOPS_SKIP_POSTGRES=1 to skip the postgres tests", pytrace=False)


def test_upgrade_from_0001_keeps_the_data(store: Store) -> None:
    """A store created by the first release (0001) upgrades in place to the archive table (0002)."""
    from alembic import command as alembic_command

    from zlops.model import RunRecord

    config = alembic_config()
    with store.engine.connect() as conn, conn.begin():
        config.attributes["connection"] = conn
        alembic_command.downgrade(config, "0001")
    assert "comparison_archive" not in inspect(store.engine).get_table_names()
    store.upsert_run(RunRecord("nightly:s:1", "nightly", "s", "a" * 40, "main"))
    store.upgrade()
    assert store.current_revision() == HEAD
    assert store.get_run("nightly:s:1") is not None
    assert store.archived_comparisons("nightly:s:1") == []
