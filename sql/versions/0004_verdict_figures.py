"""Verdict figures: the numbers behind each compare row (reference, value, labels, CI, process levels),
and the alert state ``cleared`` (a suspect the judge did not confirm, closed quietly).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Rows written before this revision keep ``figures`` NULL; they are rendered from their baseline and
head samples as before (zlops.model.Comparison falls back when a verdict has no figures).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


_OLD_STATES = "'new', 'confirmed', 'acked', 'expected', 'false_positive', 'fixed', 'wontfix'"
_NEW_STATES = _OLD_STATES + ", 'cleared'"


def _ts(name: str, *, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _alerts(states: str) -> sa.Table:
    """The alerts table as 0003 left it, for SQLite's batch rebuild (SQLite does not reflect CHECKs)."""
    return sa.Table(
        "alerts", sa.MetaData(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("pool", sa.String(100), nullable=False),
        sa.Column("case", sa.String(500), nullable=False),
        sa.Column("metric", sa.String(100), nullable=False),
        sa.Column("unit", sa.String(32), nullable=False),
        sa.Column("lower_is_better", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("opened_run_id", sa.Integer(), nullable=False),
        sa.Column("last_run_id", sa.Integer(), nullable=False),
        sa.Column("base_value", sa.Float(), nullable=False),
        sa.Column("band_pct", sa.Float(), nullable=False),
        sa.Column("first_base_sha", sa.String(64), nullable=False),
        sa.Column("first_head_sha", sa.String(64), nullable=False),
        sa.Column("last_head_sha", sa.String(64), nullable=False),
        sa.Column("last_change_pct", sa.Float(), nullable=True),
        sa.Column("worst_worse_pct", sa.Float(), nullable=True),
        sa.Column("thread_notification_id", sa.Integer(), nullable=True),
        sa.Column("thread_ts", sa.String(32), nullable=True),
        sa.Column("channel_id", sa.String(32), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        _ts("opened_at", nullable=False),
        _ts("updated_at", nullable=False),
        _ts("closed_at"),
        sa.PrimaryKeyConstraint("id", name="pk_alerts"),
        sa.ForeignKeyConstraint(["opened_run_id"], ["runs.id"], name="fk_alerts_opened_run_id_runs"),
        sa.ForeignKeyConstraint(["last_run_id"], ["runs.id"], name="fk_alerts_last_run_id_runs"),
        sa.ForeignKeyConstraint(["thread_notification_id"], ["notifications.id"],
                                name="fk_alerts_thread_notification_id_notifications"),
        sa.UniqueConstraint("suite", "pool", "case", "metric", "opened_run_id",
                            name="uq_alerts_suite_pool_case_metric_opened_run_id"),
        sa.CheckConstraint(f"state IN ({states})", name="ck_alerts_state"),
        sa.Index("ix_alerts_suite_state", "suite", "state"),
    )


def upgrade() -> None:
    with op.batch_alter_table("comparisons") as batch:
        batch.add_column(sa.Column("figures", sa.JSON(none_as_null=True), nullable=True))
    with op.batch_alter_table("alerts", copy_from=_alerts(_OLD_STATES)) as batch:
        batch.drop_constraint(op.f("ck_alerts_state"), type_="check")
        batch.create_check_constraint(op.f("ck_alerts_state"), f"state IN ({_NEW_STATES})")


def downgrade() -> None:
    op.execute("UPDATE alerts SET state = 'false_positive' WHERE state = 'cleared'")
    with op.batch_alter_table("alerts", copy_from=_alerts(_NEW_STATES)) as batch:
        batch.drop_constraint(op.f("ck_alerts_state"), type_="check")
        batch.create_check_constraint(op.f("ck_alerts_state"), f"state IN ({_OLD_STATES})")
    with op.batch_alter_table("comparisons") as batch:
        batch.drop_column("figures")
