"""The result store: runs, shard outcomes, results, comparisons and the notification outbox.

SQLAlchemy 2.0 models (:mod:`.models`), Alembic migrations shipped from ``sql/`` (:mod:`.migrate`),
session-level reads and idempotent writes (:mod:`.runs`, :mod:`.series`, :mod:`.comparisons`,
:mod:`.outbox`), named report queries (:mod:`.queries`) and :class:`Store`, which ties them together.
"""

from __future__ import annotations

from zlops.store.store import Store

__all__ = ["Store"]
