"""The recall canaries in the store: their results (read and replaced one case at a time) and their nights
(table ``canary_nights``, migration 0011): the schedule's clock, the nights written, a window of them for the
trust ledger.

Session-level functions; the caller owns the transaction (``store.read`` / ``store.unit_of_work``). Every
read is one query, whatever the number of series or nights: the ledger reads a window of nights in one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from zlops.errors import StoreError
from zlops.model import CaseResult
from zlops.store.models import CanaryNightRow, Result, Run, SeriesPointRow, SeriesRow, Shard
from zlops.store.points import spreads
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


def case_results(session: Session, run_key: str, cases: Collection[str]) -> list[tuple[str, int, CaseResult]]:
    """(pool, device, result) of the run's results of ``cases`` only (a canary's source and the canary), in one
    query: planting reads two cases of a night, never its 10^4-10^5 results."""
    run = require_run(session, run_key)
    rows = session.connection().execute(
        select(Shard.pool, Shard.device, Result.case, Result.metric, Result.unit, Result.lower_is_better,
               Result.samples, Result.params)
        .join(Result, Result.shard_id == Shard.id)
        .where(Shard.run_id == run.id, Result.case.in_(sorted(set(cases))))
        .order_by(Shard.pool, Shard.device, Result.id))
    return [(pool, device, CaseResult(case=case, metric=metric, unit=unit, lower_is_better=bool(lower),
                                      samples=tuple(samples), params=dict(params or {})))
            for pool, device, case, metric, unit, lower, samples, params in rows]


def replace_case_results(session: Session, run_key: str, pool: str, device: int, case: str,
                         results: Sequence[CaseResult]) -> int:
    """Replace the stored shard's results of ``case`` (a canary's series) by ``results``, every other result of
    the shard left alone; the run's series points of that case on the pool are dropped (they no longer match;
    the compare step writes them again). Idempotent. Returns how many were written."""
    run = require_run(session, run_key)
    shard_id = session.scalar(select(Shard.id).where(Shard.run_id == run.id, Shard.pool == pool,
                                                     Shard.device == device))
    if shard_id is None:
        raise StoreError(f"run {run_key!r} has no shard {pool}/{device} to plant {case!r} in")
    session.execute(delete(Result).where(Result.shard_id == shard_id, Result.case == case))
    series = select(SeriesRow.id).where(SeriesRow.suite == run.suite, SeriesRow.pool == pool, SeriesRow.case == case)
    session.execute(delete(SeriesPointRow).where(SeriesPointRow.run_id == run.id, SeriesPointRow.series_id.in_(series)))
    if results:
        spread = spreads([r.samples for r in results])
        session.execute(insert(Result), [
            {"shard_id": shard_id, "case": r.case, "metric": r.metric, "unit": r.unit,
             "lower_is_better": r.lower_is_better, "median": r.median, "n": len(r.samples), "spread_pct": sp,
             "samples": list(r.samples), "params": dict(r.params)} for r, sp in zip(results, spread, strict=True)])
    return len(results)


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
