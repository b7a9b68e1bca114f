"""A run's compare table: saved once per (re)scoring, rebuilt into :class:`~zlops.model.Comparison`.

Saving replaces the run's rows wholesale, so rescoring a run with new thresholds (or an Airflow retry
of the compare step) leaves exactly the latest table. The caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from zlops.errors import StoreError
from zlops.model import BaselinePoint, Comparison, Judgement, Verdict
from zlops.store.models import ComparisonRow
from zlops.store.runs import require_run


def _row(run_id: int, c: Comparison) -> dict[str, Any]:
    j = c.judgement
    return {
        "run_id": run_id, "pool": c.pool, "case": c.case, "metric": c.metric, "unit": c.unit,
        "lower_is_better": c.lower_is_better,
        "base_run_key": None if c.base is None else c.base.run_key,
        "base_sha": None if c.base is None else c.base.sha,
        "base_samples": None if c.base is None else list(c.base.samples),
        "head_samples": None if c.head_samples is None else list(c.head_samples),
        "change_pct": j.change_pct, "worse_pct": j.worse_pct, "threshold_pct": j.threshold_pct,
        "verdict": Verdict(j.verdict).value, "note": j.note,
    }


def save_comparisons(session: Session, run_key: str, comparisons: Sequence[Comparison]) -> None:
    """Replace the comparison rows of ``run_key`` with ``comparisons``.

    Every comparison must be of the run's suite, and (pool, case, metric) must not repeat; otherwise
    StoreError (and, in the caller's transaction, nothing is changed).
    """
    run = require_run(session, run_key)
    foreign = sorted({c.suite for c in comparisons if c.suite != run.suite})
    if foreign:
        raise StoreError(f"run {run_key!r} is of suite {run.suite!r}; refusing comparisons of "
                         f"suite(s) {', '.join(foreign)}")
    session.execute(delete(ComparisonRow).where(ComparisonRow.run_id == run.id))
    if not comparisons:
        return
    try:
        session.execute(insert(ComparisonRow), [_row(run.id, c) for c in comparisons])
    except IntegrityError as exc:
        raise StoreError(f"comparisons of run {run_key!r} were refused "
                         f"(a (pool, case, metric) repeated?): {exc.orig}") from exc


def comparisons(session: Session, run_key: str) -> list[Comparison]:
    """The saved comparisons of ``run_key``, in the order they were saved."""
    run = require_run(session, run_key)
    rows = session.scalars(select(ComparisonRow).where(ComparisonRow.run_id == run.id)
                           .order_by(ComparisonRow.id))
    out: list[Comparison] = []
    for r in rows:
        base = None
        if r.base_run_key is not None:
            base = BaselinePoint(run_key=r.base_run_key, sha=r.base_sha or "", unit=r.unit,
                                 samples=tuple(r.base_samples or ()))
        out.append(Comparison(
            suite=run.suite, pool=r.pool, case=r.case, metric=r.metric, unit=r.unit,
            lower_is_better=r.lower_is_better, base=base,
            head_samples=None if r.head_samples is None else tuple(r.head_samples),
            judgement=Judgement(verdict=Verdict(r.verdict), change_pct=r.change_pct,
                                worse_pct=r.worse_pct, threshold_pct=r.threshold_pct,
                                note=r.note)))
    return out
