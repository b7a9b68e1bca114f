"""Comparison archive: the compare tables a rescore replaced, kept beside the current one.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "comparison_archive",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("archived_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("rows", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_comparison_archive"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_comparison_archive_run_id_runs",
                                ondelete="CASCADE"),
        sa.UniqueConstraint("run_id", "revision", name="uq_comparison_archive_run_id_revision"),
    )


def downgrade() -> None:
    op.drop_table("comparison_archive")
