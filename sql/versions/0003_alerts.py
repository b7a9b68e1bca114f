"""Alerts: the regression lifecycle (alerts, alert_events) and threaded outbox messages.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-06

- ``alerts``: one row per regressed series from the night it was flagged until fixed or closed,
  keyed by (suite, pool, case, metric, opened_run_id); its Slack thread (ts, channel id).
- ``alert_events``: every opening, state change and worsening, with the run or the person behind it.
- ``notifications`` gains ``parent_id`` (a reply waits for its thread's first message), ``ts`` and
  ``channel_id`` (Slack's answer), ``result`` (an upload's file ids and permalinks), and the status
  ``abandoned`` (a message that can never be sent).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STATES = "'new', 'confirmed', 'acked', 'expected', 'false_positive', 'fixed', 'wontfix'"


def _ts(name: str, *, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


#: The check constraint's name as 0001 created it (the naming convention prefixed the given name again).
_OLD_CHECK = "ck_notifications_ck_notifications_status"
_NEW_CHECK = "ck_notifications_status"  # what the model's CheckConstraint(name="status") is called


def _notifications(*, statuses: str, check: str, extra: Sequence[sa.Column] = ()) -> sa.Table:
    """The notifications table as a revision left it, for SQLite's batch rebuild.

    SQLite does not reflect CHECK constraints, so batch mode is handed the table (with its named
    check) instead of reflecting it; PostgreSQL alters in place and ignores this.
    """
    return sa.Table(
        "notifications", sa.MetaData(),
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
        *extra,
        sa.PrimaryKeyConstraint("id", name="pk_notifications"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_notifications_run_id_runs"),
        sa.UniqueConstraint("run_id", "kind", "channel", name="uq_notifications_run_id_kind_channel"),
        sa.CheckConstraint(f"status IN ({statuses})", name=check),
    )


def upgrade() -> None:
    before = _notifications(statuses="'pending', 'sent', 'failed'", check=_OLD_CHECK)
    with op.batch_alter_table("notifications", copy_from=before) as batch:
        batch.add_column(sa.Column("parent_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("ts", sa.String(32), nullable=True))
        batch.add_column(sa.Column("channel_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("result", sa.JSON(), nullable=True))
        batch.create_foreign_key(op.f("fk_notifications_parent_id_notifications"), "notifications",
                                 ["parent_id"], ["id"])
        batch.drop_constraint(op.f(_OLD_CHECK), type_="check")
        batch.create_check_constraint(op.f(_NEW_CHECK), "status IN ('pending', 'sent', 'failed', 'abandoned')")

    op.create_table(
        "alerts",
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
        sa.CheckConstraint(f"state IN ({_STATES})", name=op.f("ck_alerts_state")),
    )
    op.create_index("ix_alerts_suite_state", "alerts", ["suite", "state"])

    op.create_table(
        "alert_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("alert_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        _ts("at", nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("from_state", sa.String(16), nullable=True),
        sa.Column("to_state", sa.String(16), nullable=False),
        sa.Column("change_pct", sa.Float(), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(100), nullable=False),
        sa.Column("announced", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_alert_events"),
        sa.ForeignKeyConstraint(["alert_id"], ["alerts.id"], name="fk_alert_events_alert_id_alerts",
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_alert_events_run_id_runs"),
    )
    op.create_index("ix_alert_events_alert_id", "alert_events", ["alert_id"])


def downgrade() -> None:
    op.drop_index("ix_alert_events_alert_id", table_name="alert_events")
    op.drop_table("alert_events")
    op.drop_index("ix_alerts_suite_state", table_name="alerts")
    op.drop_table("alerts")
    # 0002 knows no "abandoned": such messages go back to failed (retried, as 0002 would)
    op.execute("UPDATE notifications SET status = 'failed' WHERE status = 'abandoned'")
    after = _notifications(statuses="'pending', 'sent', 'failed', 'abandoned'", check=_NEW_CHECK, extra=(
        sa.Column("parent_id", sa.Integer(), nullable=True), sa.Column("ts", sa.String(32), nullable=True),
        sa.Column("channel_id", sa.String(32), nullable=True), sa.Column("result", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["parent_id"], ["notifications.id"], name="fk_notifications_parent_id_notifications"),
    ))
    with op.batch_alter_table("notifications", copy_from=after) as batch:
        batch.drop_constraint(op.f(_NEW_CHECK), type_="check")
        batch.create_check_constraint(op.f(_OLD_CHECK), "status IN ('pending', 'sent', 'failed')")
        batch.drop_constraint(op.f("fk_notifications_parent_id_notifications"), type_="foreignkey")
        batch.drop_column("result")
        batch.drop_column("channel_id")
        batch.drop_column("ts")
        batch.drop_column("parent_id")
