"""Kernel inventories per shard (issue 25): the compiled kernels a benchmark process used.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01

- ``kernel_inventories``: one per shard (provider, ok/none/error with the reason, kernels over the cap
  counted in ``dropped``, the autotuner's cached picks);
- ``kernels``: one per compiled kernel of an inventory, unique per (inventory, cache_key): name, sha256
  of its compiled code, launch metadata, whether the shard compiled or reused it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "kernel_inventories",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("shard_id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(32), nullable=False),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("kernels_n", sa.Integer(), nullable=False),
        sa.Column("dropped", sa.Integer(), nullable=False),
        sa.Column("dropped_names", sa.JSON(), nullable=False),
        sa.Column("autotune", sa.JSON(), nullable=False),
        sa.Column("parse_s", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_kernel_inventories"),
        sa.ForeignKeyConstraint(["shard_id"], ["shards.id"], name="fk_kernel_inventories_shard_id_shards",
                                ondelete="CASCADE"),
        sa.UniqueConstraint("shard_id", name="uq_kernel_inventories_shard_id"),
    )
    op.create_table(
        "kernels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("inventory_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(250), nullable=False),
        sa.Column("cache_key", sa.String(128), nullable=False),
        sa.Column("code_hash", sa.String(64), nullable=True),
        sa.Column("binary", sa.String(16), nullable=True),
        sa.Column("num_warps", sa.Integer(), nullable=True),
        sa.Column("num_stages", sa.Integer(), nullable=True),
        sa.Column("num_ctas", sa.Integer(), nullable=True),
        sa.Column("backend", sa.String(32), nullable=True),
        sa.Column("arch", sa.String(32), nullable=True),
        sa.Column("shared", sa.Integer(), nullable=True),
        sa.Column("constants", sa.JSON(), nullable=False),
        sa.Column("compiler_version", sa.String(64), nullable=True),
        sa.Column("compiled", sa.Boolean(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_kernels"),
        sa.ForeignKeyConstraint(["inventory_id"], ["kernel_inventories.id"],
                                name="fk_kernels_inventory_id_kernel_inventories", ondelete="CASCADE"),
        sa.UniqueConstraint("inventory_id", "cache_key", name="uq_kernels_inventory_id_cache_key"),
    )
    op.create_index("ix_kernels_name", "kernels", ["name"])


def downgrade() -> None:
    op.drop_index("ix_kernels_name", table_name="kernels")
    op.drop_table("kernels")
    op.drop_table("kernel_inventories")
