"""Summary figures at ingest and pooled series points: history reads without raw samples.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

- ``results`` gains ``spread_pct`` (1.4826 * MAD of the log samples in percent; NULL for fewer than
  two samples or a sample <= 0), backfilled from ``samples``.
- ``series``: the series of a suite, (pool, case, metric, unit, lower_is_better), so the points below
  carry numbers and an id instead of the same strings every night.
- ``series_points``: one row per (run, series), the samples of the pool's ok shards pooled in device
  order (later devices converted to the first device's unit), with median, n and spread_pct;
  backfilled for every stored run.
- ``ix_runs_suite_kind_accepted_finished_at``: the history and baseline reads' run lookup;
  ``ix_comparisons_run_id_verdict``: the level changes of the window's runs (``verdict_frame``).

The backfill goes one run at a time (one SELECT of its results, one UPDATE batch, one INSERT batch),
so its memory is that of the largest run. It uses :mod:`zlops.store.points`, the functions ingest uses,
so backfilled rows equal the rows a fresh ingest writes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from zlops.model import CaseResult
from zlops.store.points import point_rows, point_values, pool_device_results, spreads

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_runs = sa.table("runs", sa.column("id", sa.Integer()), sa.column("suite", sa.String()))
_shards = sa.table("shards", sa.column("id", sa.Integer()), sa.column("run_id", sa.Integer()),
                   sa.column("pool", sa.String()), sa.column("device", sa.Integer()),
                   sa.column("status", sa.String()))
_results = sa.table("results", sa.column("id", sa.Integer()), sa.column("shard_id", sa.Integer()),
                    sa.column("case", sa.String()), sa.column("metric", sa.String()),
                    sa.column("unit", sa.String()), sa.column("lower_is_better", sa.Boolean()),
                    sa.column("samples", sa.JSON()), sa.column("spread_pct", sa.Float()))
_series = sa.Table("series", sa.MetaData(), sa.Column("id", sa.Integer(), primary_key=True),
                   sa.Column("suite", sa.String()), sa.Column("pool", sa.String()), sa.Column("case", sa.String()),
                   sa.Column("metric", sa.String()), sa.Column("unit", sa.String()),
                   sa.Column("lower_is_better", sa.Boolean()))
_points = sa.table("series_points", sa.column("run_id", sa.Integer()), sa.column("series_id", sa.Integer()),
                   sa.column("median", sa.Float()), sa.column("n", sa.Integer()), sa.column("spread_pct", sa.Float()))


def upgrade() -> None:
    op.add_column("results", sa.Column("spread_pct", sa.Float(), nullable=True))
    op.create_index("ix_runs_suite_kind_accepted_finished_at", "runs",
                    ["suite", "kind", "accepted", "finished_at"])
    op.create_index("ix_comparisons_run_id_verdict", "comparisons", ["run_id", "verdict"])
    op.create_table(
        "series",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("pool", sa.String(100), nullable=False),
        sa.Column("case", sa.String(500), nullable=False),
        sa.Column("metric", sa.String(100), nullable=False),
        sa.Column("unit", sa.String(32), nullable=False),
        sa.Column("lower_is_better", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_series"),
        sa.UniqueConstraint("suite", "pool", "case", "metric", "unit", "lower_is_better",
                            name="uq_series_suite_pool_case_metric_unit_lower_is_better"),
    )
    op.create_table(
        "series_points",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("series_id", sa.Integer(), nullable=False),
        sa.Column("median", sa.Float(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("spread_pct", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", "series_id", name="pk_series_points"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_series_points_run_id_runs",
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["series_id"], ["series.id"], name="fk_series_points_series_id_series",
                                ondelete="CASCADE"),
    )
    _backfill(op.get_bind())


def _backfill(conn: sa.Connection) -> None:
    runs = conn.execute(sa.select(_runs.c.id, _runs.c.suite).order_by(_runs.c.id)).all()
    for run_id, suite in runs:
        rows = conn.execute(
            sa.select(_results.c.id, _shards.c.pool, _shards.c.device, _shards.c.status, _results.c.case,
                      _results.c.metric, _results.c.unit, _results.c.lower_is_better, _results.c.samples)
            .join(_shards, _shards.c.id == _results.c.shard_id)
            .where(_shards.c.run_id == run_id)
            .order_by(_shards.c.pool, _shards.c.device, _results.c.id)).all()
        if not rows:
            continue
        spread = spreads([r.samples for r in rows])
        updates = [{"rid": r.id, "spread": s} for r, s in zip(rows, spread, strict=True) if s is not None]
        if updates:
            conn.execute(sa.update(_results).where(_results.c.id == sa.bindparam("rid"))
                         .values(spread_pct=sa.bindparam("spread")), updates)
        pooled = pool_device_results(
            (r.pool, r.device, CaseResult(r.case, r.metric, r.unit, bool(r.lower_is_better),
                                          tuple(float(v) for v in r.samples)))
            for r in rows if r.status == "ok")
        rows_of_points = point_rows(pooled)
        if rows_of_points:
            conn.execute(sa.insert(_points), point_values(run_id, suite, conn, _series, rows_of_points))


def downgrade() -> None:
    op.drop_table("series_points")
    op.drop_table("series")
    op.drop_index("ix_comparisons_run_id_verdict", table_name="comparisons")
    op.drop_index("ix_runs_suite_kind_accepted_finished_at", table_name="runs")
    with op.batch_alter_table("results") as batch:
        batch.drop_column("spread_pct")
