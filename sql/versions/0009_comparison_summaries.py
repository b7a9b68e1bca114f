"""Compare rows keep each side's median and count, not its raw samples.

Revision ID: 0009
Revises: 0006
Create Date: 2026-11-30

A night of a 20,000-series suite wrote 40,000 JSON arrays of raw samples into ``comparisons``, which
the ``results`` table already holds by run; the renderings, alerts, rescore and PR compare read the
verdict's figures or a side's median. ``comparisons`` gains ``base_median``, ``base_n``,
``head_median`` and ``head_n`` (the median as :func:`zlops.model.median_of` takes it, and the sample
count), backfilled from ``base_samples`` / ``head_samples``, which are then dropped. Archived compare
tables (``comparison_archive.rows``, JSON) keep their old shape: the reader summarizes their samples.

The backfill reads the rows in id order, a batch at a time (memory of one batch), and writes one
executemany UPDATE per batch. The downgrade restores the columns empty (the samples are gone).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from zlops.model import median_of

revision: str = "0009"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5000

_comparisons = sa.table("comparisons", sa.column("id", sa.Integer()), sa.column("base_samples", sa.JSON()),
                        sa.column("head_samples", sa.JSON()), sa.column("base_median", sa.Float()),
                        sa.column("base_n", sa.Integer()), sa.column("head_median", sa.Float()),
                        sa.column("head_n", sa.Integer()))


def _summary(samples: Any) -> tuple[float | None, int | None]:
    if isinstance(samples, str):  # a driver that hands JSON back as text
        samples = json.loads(samples)
    if not samples:
        return None, None
    values = [float(v) for v in samples]
    return median_of(values), len(values)


def upgrade() -> None:
    with op.batch_alter_table("comparisons") as batch:
        batch.add_column(sa.Column("base_median", sa.Float(), nullable=True))
        batch.add_column(sa.Column("base_n", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("head_median", sa.Float(), nullable=True))
        batch.add_column(sa.Column("head_n", sa.Integer(), nullable=True))
    _backfill(op.get_bind())
    with op.batch_alter_table("comparisons") as batch:
        batch.drop_column("base_samples")
        batch.drop_column("head_samples")


def _backfill(conn: sa.Connection) -> None:
    c = _comparisons.c
    last = 0
    while True:
        rows = conn.execute(sa.select(c.id, c.base_samples, c.head_samples)
                            .where(c.id > last, sa.or_(c.base_samples.isnot(None), c.head_samples.isnot(None)))
                            .order_by(c.id).limit(BATCH)).all()
        if not rows:
            return
        updates = []
        for rid, base, head in rows:
            bm, bn = _summary(base)
            hm, hn = _summary(head)
            updates.append({"rid": rid, "bm": bm, "bn": bn, "hm": hm, "hn": hn})
        conn.execute(sa.update(_comparisons).where(c.id == sa.bindparam("rid"))
                     .values(base_median=sa.bindparam("bm"), base_n=sa.bindparam("bn"),
                             head_median=sa.bindparam("hm"), head_n=sa.bindparam("hn")), updates)
        last = rows[-1][0]


def downgrade() -> None:
    with op.batch_alter_table("comparisons") as batch:
        batch.add_column(sa.Column("base_samples", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("head_samples", sa.JSON(), nullable=True))
    with op.batch_alter_table("comparisons") as batch:
        batch.drop_column("head_n")
        batch.drop_column("head_median")
        batch.drop_column("base_n")
        batch.drop_column("base_median")
