"""The forge receiver's state: the checks it opened (each must finish) and the deliveries it verified.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06

- ``forge_checks``: a "running" check zlops posted on a commit, unique per (channel, external id, commit, compare
  run); ``state`` open -> closing -> closed, with the closing conclusion and reason (zlops.forge.lifecycle);
- ``forge_deliveries``: a verified webhook delivery, unique per (forge, body digest), with the decision taken:
  replays run nothing, and a PR's and a commenter's triggers are counted in a window (zlops.forge.guard).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "forge_checks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(300), nullable=False),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("external_id", sa.String(300), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("pr", sa.Integer(), nullable=True),
        sa.Column("ref", sa.String(300), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("runner", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("conclusion", sa.String(16), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_forge_checks"),
        sa.UniqueConstraint("channel", "external_id", "head_sha", "run_id",
                            name="uq_forge_checks_channel_external_id_head_sha_run_id"),
    )
    op.create_index("ix_forge_checks_state", "forge_checks", ["state"])
    op.create_index("ix_forge_checks_run_id", "forge_checks", ["run_id"])
    op.create_table(
        "forge_deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("forge", sa.String(16), nullable=False),
        sa.Column("delivery", sa.String(100), nullable=True),
        sa.Column("body_sha", sa.String(64), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("repo", sa.String(300), nullable=True),
        sa.Column("pr", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(200), nullable=True),
        sa.Column("decision", sa.String(32), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_forge_deliveries"),
        sa.UniqueConstraint("forge", "body_sha", name="uq_forge_deliveries_forge_body_sha"),
    )
    op.create_index("ix_forge_deliveries_received_at", "forge_deliveries", ["received_at"])
    op.create_index("ix_forge_deliveries_repo_pr", "forge_deliveries", ["repo", "pr"])


def downgrade() -> None:
    op.drop_index("ix_forge_deliveries_repo_pr", table_name="forge_deliveries")
    op.drop_index("ix_forge_deliveries_received_at", table_name="forge_deliveries")
    op.drop_table("forge_deliveries")
    op.drop_index("ix_forge_checks_run_id", table_name="forge_checks")
    op.drop_index("ix_forge_checks_state", table_name="forge_checks")
    op.drop_table("forge_checks")
