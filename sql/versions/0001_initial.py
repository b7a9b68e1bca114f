"""Initial schema: runs, shards, results, comparisons, notifications.

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Hand-written to match zlops/store/models.py; every constraint and index is named explicitly (the
models' naming convention) so later migrations can address them on both SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _ts(name: str, *, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_key", sa.String(250), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("branch", sa.String(250), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("accepted", sa.Boolean(), nullable=False),
        _ts("started_at", nullable=False),
        _ts("finished_at"),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.UniqueConstraint("run_key", name="uq_runs_run_key"),
    )
    op.create_index("ix_runs_suite_kind_started_at", "runs", ["suite", "kind", "started_at"])

    op.create_table(
        "shards",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(100), nullable=False),
        sa.Column("device", sa.Integer(), nullable=False),
        sa.Column("backend", sa.String(50), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        _ts("started_at"),
        _ts("ended_at"),
        sa.Column("artifact_dir", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("results_file", sa.Text(), nullable=True),
        sa.Column("telemetry", sa.JSON(), nullable=True),
        sa.Column("identity", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_shards"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_shards_run_id_runs",
                                ondelete="CASCADE"),
        sa.UniqueConstraint("run_id", "pool", "device", name="uq_shards_run_id_pool_device"),
    )

    op.create_table(
        "results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("shard_id", sa.Integer(), nullable=False),
        sa.Column("case", sa.String(500), nullable=False),
        sa.Column("metric", sa.String(100), nullable=False),
        sa.Column("unit", sa.String(32), nullable=False),
        sa.Column("lower_is_better", sa.Boolean(), nullable=False),
        sa.Column("median", sa.Float(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("samples", sa.JSON(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_results"),
        sa.ForeignKeyConstraint(["shard_id"], ["shards.id"], name="fk_results_shard_id_shards",
                                ondelete="CASCADE"),
        sa.UniqueConstraint("shard_id", "case", "metric", name="uq_results_shard_id_case_metric"),
    )
    op.create_index("ix_results_case_metric", "results", ["case", "metric"])

    op.create_table(
        "comparisons",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(100), nullable=False),
        sa.Column("case", sa.String(500), nullable=False),
        sa.Column("metric", sa.String(100), nullable=False),
        sa.Column("unit", sa.String(32), nullable=False),
        sa.Column("lower_is_better", sa.Boolean(), nullable=False),
        sa.Column("base_run_key", sa.String(250), nullable=True),
        sa.Column("base_sha", sa.String(64), nullable=True),
        sa.Column("base_samples", sa.JSON(), nullable=True),
        sa.Column("head_samples", sa.JSON(), nullable=True),
        sa.Column("change_pct", sa.Float(), nullable=True),
        sa.Column("worse_pct", sa.Float(), nullable=True),
        sa.Column("threshold_pct", sa.Float(), nullable=True),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_comparisons"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_comparisons_run_id_runs",
                                ondelete="CASCADE"),
        sa.UniqueConstraint("run_id", "pool", "case", "metric",
                            name="uq_comparisons_run_id_pool_case_metric"),
    )

    op.create_table(
        "notifications",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(50), nullable=False),
        sa.Column("channel", sa.String(200), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        _ts("created_at", nullable=False),
        _ts("sent_at"),
        sa.PrimaryKeyConstraint("id", name="pk_notifications"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_notifications_run_id_runs"),
        sa.UniqueConstraint("run_id", "kind", "channel",
                            name="uq_notifications_run_id_kind_channel"),
        sa.CheckConstraint("status IN ('pending', 'sent', 'failed')",
                           name="ck_notifications_status"),
    )


def downgrade() -> None:
    op.drop_table("notifications")
    op.drop_table("comparisons")
    op.drop_index("ix_results_case_metric", table_name="results")
    op.drop_table("results")
    op.drop_table("shards")
    op.drop_index("ix_runs_suite_kind_started_at", table_name="runs")
    op.drop_table("runs")
