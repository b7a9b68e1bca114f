"""The recall canaries' nights (table ``canary_nights``, migration 0011): the schedule's clock, the nights
written, and a window of them for the trust ledger.

Session-level functions; the caller owns the transaction (``store.read`` / ``store.unit_of_work``). Every
read is one query, whatever the number of series or nights: the ledger reads a window of nights in one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from zlops.store.models import CanaryNightRow, Run
from zlops.store.runs import require_run

#: The columns a canary night is written with and read back as (besides the run's key).
FIELDS = ("suite", "pool", "case", "metric", "source_case", "night", "active", "episode", "planted_pct", "at",
          "verdict", "source_verdict", "change_pct", "how")


def canary_clock(session: Session, run_key: str) -> int:
    """The schedule's clock for ``run_key``: the number of the suite's runs with canary nights that started
    before it (a retried run counts what it counted the first time: its own rows are left out)."""
    run = require_run(session, run_key)
    return int(session.scalar(
        select(func.count(func.distinct(CanaryNightRow.run_id)))
        .where(CanaryNightRow.suite == run.suite, CanaryNightRow.at < run.started_at,
               CanaryNightRow.run_id != run.id)) or 0)


#: What the report step adds to a canary night once the judge has spoken.
JUDGED = ("verdict", "source_verdict", "change_pct", "how")


def save_canary_nights(session: Session, run_key: str, nights: Sequence[Mapping[str, Any]], *,
                       keep_judged: bool = False) -> int:
    """Replace the run's canary nights by ``nights`` (mappings with :data:`FIELDS` but ``suite`` and ``at``,
    which are the run's): idempotent, so a retried step writes the same rows again. ``keep_judged`` (the
    planting, run again after the night was judged) keeps what the judge said of a night already stored.
    Returns how many."""
    run = require_run(session, run_key)
    judged: dict[tuple[str, str, str], dict[str, Any]] = {}
    if keep_judged:
        for r in session.scalars(select(CanaryNightRow).where(CanaryNightRow.run_id == run.id)):
            judged[(r.pool, r.case, r.metric)] = {k: getattr(r, k) for k in JUDGED}
    session.execute(delete(CanaryNightRow).where(CanaryNightRow.run_id == run.id))
    rows = [{**{k: n.get(k) for k in FIELDS}, **judged.get((n["pool"], n["case"], n["metric"]), {}),
             "suite": run.suite, "at": run.started_at, "run_id": run.id} for n in nights]
    if rows:
        session.execute(insert(CanaryNightRow), rows)
    return len(rows)


def _as_dicts(session: Session, query: Any) -> list[dict[str, Any]]:
    return [{"run_key": r.run_key, **{k: getattr(r.CanaryNightRow, k) for k in FIELDS}}
            for r in session.execute(query)]


def window_canary_nights(session: Session, since: datetime, until: datetime, *, suite: str | None = None
                         ) -> list[dict[str, Any]]:
    """Every canary night of runs started in ``[since, until)``, oldest first: run_key and :data:`FIELDS`."""
    query = (select(CanaryNightRow, Run.run_key).join(Run, Run.id == CanaryNightRow.run_id)
             .where(CanaryNightRow.at >= since, CanaryNightRow.at < until)
             .order_by(CanaryNightRow.at, CanaryNightRow.night, CanaryNightRow.id))
    if suite is not None:
        query = query.where(CanaryNightRow.suite == suite)
    return _as_dicts(session, query)


def suite_canary_nights(session: Session, suite: str, *, from_night: int, until: datetime
                        ) -> list[dict[str, Any]]:
    """The suite's canary nights from night ``from_night`` on, of runs started at or before ``until`` (a
    night's report reads its canary's episode so far, tonight included), oldest first."""
    query = (select(CanaryNightRow, Run.run_key).join(Run, Run.id == CanaryNightRow.run_id)
             .where(CanaryNightRow.suite == suite, CanaryNightRow.night >= from_night, CanaryNightRow.at <= until)
             .order_by(CanaryNightRow.at, CanaryNightRow.night, CanaryNightRow.id))
    return _as_dicts(session, query)
