"""The result store: runs, shard outcomes, results, comparisons and the notification outbox.

SQLAlchemy 2.0 models (:mod:`.models`), Alembic migrations shipped from ``sql/`` (:mod:`.migrate`),
session-level reads and idempotent writes (:mod:`.runs`, :mod:`.series`, :mod:`.comparisons`,
:mod:`.outbox`), named report queries (:mod:`.queries`) and :class:`Store`, which ties them together.

May import: :mod:`zlops.alerts.lifecycle`, :mod:`zlops.bisect.search` (pure values it keeps), kernels and the
vocabulary; nothing that runs, judges or sends (the layers in docs/design/layers.md; tests/test_layers.py
enforces them).
"""

from __future__ import annotations

from zlops.store.store import Store

__all__ = ["Store"]
