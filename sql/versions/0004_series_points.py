"""Summary figures at ingest and pooled series points: history reads without raw samples.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

- ``results`` gains ``spread_pct`` (1.4826 * MAD of the log samples in percent; NULL for fewer than
  two samples or a sample <= 0), backfilled from ``samples``.
- ``series_points``: one row per (run, pool, case, metric), the samples of the pool's ok shards pooled
  in device order (later devices converted to the first device's unit), with median, n and
  spread_pct; backfilled for every stored run.
- ``ix_runs_suite_kind_accepted_finished_at``: the history and baseline reads' run lookup.

The backfill goes one run at a time (one SELECT of its results, one UPDATE batch, one INSERT batch),
so its memory is that of the largest run. It uses :mod:`zlops.store.points`, the functions ingest uses,
so backfilled rows equal the rows a fresh ingest writes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from zlops.model import CaseResult
from zlops.store.points import point_rows, pool_device_results, spreads

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_runs = sa.table("runs", sa.column("id", sa.Integer()))
_shards = sa.table("shards", sa.column("id", sa.Integer()), sa.column("run_id", sa.Integer()),
                   sa.column("pool", sa.String()), sa.column("device", sa.Integer()),
                   sa.column("status", sa.String()))
_results = sa.table("results", sa.column("id", sa.Integer()), sa.column("shard_id", sa.Integer()),
                    sa.column("case", sa.String()), sa.column("metric", sa.String()),
                    sa.column("unit", sa.String()), sa.column("lower_is_better", sa.Boolean()),
                    sa.column("samples", sa.JSON()), sa.column("spread_pct", sa.Float()))
_points = sa.table("series_points", sa.column("run_id", sa.Integer()), sa.column("pool", sa.String()),
                   sa.column("case", sa.String()), sa.column("metric", sa.String()),
                   sa.column("unit", sa.String()), sa.column("lower_is_better", sa.Boolean()),
                   sa.column("median", sa.Float()), sa.column("n", sa.Integer()),
                   sa.column("spread_pct", sa.Float()))


def upgrade() -> None:
    op.add_column("results", sa.Column("spread_pct", sa.Float(), nullable=True))
    op.create_index("ix_runs_suite_kind_accepted_finished_at", "runs",
                    ["suite", "kind", "accepted", "finished_at"])
    op.create_table(
        "series_points",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(100), nullable=False),
        sa.Column("case", sa.String(500), nullable=False),
        sa.Column("metric", sa.String(100), nullable=False),
        sa.Column("unit", sa.String(32), nullable=False),
        sa.Column("lower_is_better", sa.Boolean(), nullable=False),
        sa.Column("median", sa.Float(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("spread_pct", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_series_points"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_series_points_run_id_runs",
                                ondelete="CASCADE"),
        sa.UniqueConstraint("run_id", "pool", "case", "metric",
                            name="uq_series_points_run_id_pool_case_metric"),
    )
    _backfill(op.get_bind())


def _backfill(conn: sa.Connection) -> None:
    run_ids = conn.execute(sa.select(_runs.c.id).order_by(_runs.c.id)).scalars().all()
    for run_id in run_ids:
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
        points = [{"run_id": run_id, **p} for p in point_rows(pooled)]
        if points:
            conn.execute(sa.insert(_points), points)


def downgrade() -> None:
    op.drop_table("series_points")
    op.drop_index("ix_runs_suite_kind_accepted_finished_at", table_name="runs")
    with op.batch_alter_table("results") as batch:
        batch.drop_column("spread_pct")
