"""Recall canaries: one row per night of a planted canary series, what was planted and what the judge said.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06

- ``canary_nights``: unique per (run, pool, case, metric): the suite, the source case, the schedule's night
  count, whether the slowdown was planted (``active``, ``episode``: the night its episode started,
  ``planted_pct``), the run's start (``at``, indexed with the suite: the trust ledger reads a window in one
  query), and, once the night is judged, the canary's verdict, its source's verdict, the change and what
  decided it (``how``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "canary_nights",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("pool", sa.String(100), nullable=False),
        sa.Column("case", sa.String(500), nullable=False),
        sa.Column("metric", sa.String(100), nullable=False),
        sa.Column("source_case", sa.String(500), nullable=False),
        sa.Column("night", sa.Integer(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("episode", sa.Integer(), nullable=True),
        sa.Column("planted_pct", sa.Float(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=True),
        sa.Column("source_verdict", sa.String(16), nullable=True),
        sa.Column("change_pct", sa.Float(), nullable=True),
        sa.Column("how", sa.String(16), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_canary_nights"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_canary_nights_run_id_runs", ondelete="CASCADE"),
        sa.UniqueConstraint("run_id", "pool", "case", "metric", name="uq_canary_nights_run_id_pool_case_metric"),
    )
    op.create_index("ix_canary_nights_suite_at", "canary_nights", ["suite", "at"])


def downgrade() -> None:
    op.drop_index("ix_canary_nights_suite_at", table_name="canary_nights")
    op.drop_table("canary_nights")
