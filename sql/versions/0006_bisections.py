"""Bisections of confirmed regressions: the search, its steps, and the alerts whose culprit it names.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30

- ``bisections``: one per (suite, pool, good_sha, bad_sha): the range, the regressed series, the state,
  the culprit (sha, subject, author) or the ambiguous candidates.
- ``bisection_alerts``: alert -> bisection (an alert belongs to at most one).
- ``bisection_steps``: each decided A/B step, unique per (bisection, kind, sha), so a rerun resumes
  from them; ``at`` is indexed for the per-night budget of a pool.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _ts(name: str, *, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "bisections",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("pool", sa.String(100), nullable=False),
        sa.Column("device", sa.Integer(), nullable=False),
        sa.Column("good_sha", sa.String(64), nullable=False),
        sa.Column("bad_sha", sa.String(64), nullable=False),
        sa.Column("commits", sa.JSON(), nullable=False),
        sa.Column("targets", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("culprit_sha", sa.String(64), nullable=True),
        sa.Column("culprit_subject", sa.Text(), nullable=True),
        sa.Column("culprit_author", sa.String(250), nullable=True),
        sa.Column("candidates", sa.JSON(), nullable=False),
        _ts("created_at", nullable=False),
        _ts("updated_at", nullable=False),
        _ts("finished_at"),
        sa.PrimaryKeyConstraint("id", name="pk_bisections"),
        sa.UniqueConstraint("suite", "pool", "good_sha", "bad_sha", name="uq_bisections_suite_pool_good_sha_bad_sha"),
        sa.CheckConstraint("state IN ('running', 'found', 'unverified', 'ambiguous', 'not_reproduced', 'paused', "
                           "'failed')", name="ck_bisections_state"),
    )
    op.create_table(
        "bisection_alerts",
        sa.Column("alert_id", sa.Integer(), nullable=False),
        sa.Column("bisection_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("alert_id", name="pk_bisection_alerts"),
        sa.ForeignKeyConstraint(["alert_id"], ["alerts.id"], name="fk_bisection_alerts_alert_id_alerts",
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["bisection_id"], ["bisections.id"],
                                name="fk_bisection_alerts_bisection_id_bisections", ondelete="CASCADE"),
    )
    op.create_index("ix_bisection_alerts_bisection_id", "bisection_alerts", ["bisection_id"])
    op.create_table(
        "bisection_steps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("bisection_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("base_sha", sa.String(64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("pairs", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("builds", sa.Integer(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        _ts("at", nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_bisection_steps"),
        sa.ForeignKeyConstraint(["bisection_id"], ["bisections.id"],
                                name="fk_bisection_steps_bisection_id_bisections", ondelete="CASCADE"),
        sa.UniqueConstraint("bisection_id", "kind", "sha", name="uq_bisection_steps_bisection_id_kind_sha"),
    )
    op.create_index("ix_bisection_steps_at", "bisection_steps", ["at"])


def downgrade() -> None:
    op.drop_index("ix_bisection_steps_at", table_name="bisection_steps")
    op.drop_table("bisection_steps")
    op.drop_index("ix_bisection_alerts_bisection_id", table_name="bisection_alerts")
    op.drop_table("bisection_alerts")
    op.drop_table("bisections")
