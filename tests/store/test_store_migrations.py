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

TABLES = {"runs", "shards", "results", "comparisons", "notifications", "alerts", "alert_events", "series",
          "series_points", "bisections", "bisection_alerts", "bisection_steps", "kernel_inventories", "kernels",
          "canary_nights", "forge_checks", "forge_deliveries"}


HEAD = "0012"  # the latest migration; bump with every new sql/versions file

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


def test_upgrade_from_0003_backfills_summaries_and_series_points(store: Store, make) -> None:
    """0005 fills results.spread_pct and series_points of a store written before it, as ingest would."""
    from zlops.judge.compare import pool_results
    from zlops.model import ShardStatus
    from zlops.stats.noise import robust_relative_spread
    from zlops.store.points import point_rows

    store.upsert_run(make.run("r1", accepted=True, finished_day=1))
    store.record_shard("r1", make.shard("npu", 1), [make.result("a", "latency", (3.0, 4.0, 5.0)),
                                                    make.result("b", "latency", (7.0,))])
    store.record_shard("r1", make.shard("npu", 0), [make.result("a", "latency", (1.0, 2.0))])
    store.record_shard("r1", make.shard("npu", 2, ShardStatus.FAILED), [make.result("a", "latency", (999.0,))])
    store.record_shard("r1", make.shard("cpu", 0), [make.result("a", "latency", (2.0, 3.0), unit="ms")])
    store.record_shard("r1", make.shard("cpu", 1), [make.result("a", "latency", (4000.0,), unit="us")])
    store.upsert_run(make.run("r2", sha=2, accepted=True, finished_day=2))
    store.record_shard("r2", make.shard("npu", 0), [make.result("a", "latency", (6.0, 6.5))])
    store.upsert_run(make.run("empty", sha=3))
    ok_results = [(p, d, r) for p, d, r in store.results("r1") if (p, d) != ("npu", 2)]
    expected = sorted(tuple(row.values()) for row in point_rows(pool_results(ok_results)))

    config = alembic_config()
    with store.engine.connect() as conn, conn.begin():
        config.attributes["connection"] = conn
        command.downgrade(config, "0003")
    assert "series_points" not in inspect(store.engine).get_table_names()
    assert "spread_pct" not in {c["name"] for c in inspect(store.engine).get_columns("results")}
    store.upgrade()

    with store.engine.connect() as conn:
        spreads = conn.execute(text("SELECT samples, spread_pct FROM results")).all()
        points = conn.execute(text(
            'SELECT pool, "case", metric, unit, lower_is_better, median, n, spread_pct FROM series_points '
            "JOIN series ON series.id = series_points.series_id "
            "WHERE run_id = (SELECT id FROM runs WHERE run_key = 'r1')")).all()
        assert conn.execute(text("SELECT count(*) FROM series_points")).scalar() == len(expected) + 1
    import json
    assert len(spreads) == 7
    for samples, spread in spreads:
        values = json.loads(samples) if isinstance(samples, str) else samples
        want = robust_relative_spread(values) if len(values) > 1 else None
        assert spread == (None if want is None else pytest.approx(want)), samples
    got = sorted((p, c, m, u, bool(lib), med, n, s) for p, c, m, u, lib, med, n, s in points)
    assert got == [tuple(pytest.approx(v) if isinstance(v, float) else v for v in row) for row in expected]
    # the cpu series pooled a ms device and a us device in the first device's unit
    assert ("cpu", "a", "latency", "ms", True, 3.0, 3) == got[0][:7]
    history = store.history_frame("ops", ancestors=[make.sha(1), make.sha(2)], window=5)
    assert sorted(set(history["run_key"])) == ["r1", "r2"]
