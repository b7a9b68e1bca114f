"""Verdict figures: the numbers behind each compare row (reference, value, labels, CI, process levels).

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


def upgrade() -> None:
    with op.batch_alter_table("comparisons") as batch:
        batch.add_column(sa.Column("figures", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("comparisons") as batch:
        batch.drop_column("figures")
