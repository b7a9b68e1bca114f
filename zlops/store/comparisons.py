"""A run's compare table: saved once per (re)scoring, rebuilt into :class:`~zlops.model.Comparison`.

Saving replaces the run's rows wholesale, so rescoring a run with new thresholds (or an Airflow retry
of the compare step) leaves exactly the latest table. A row keeps each side as its median and sample
count (the raw samples are the results table's). The caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from zlops.errors import StoreError
from zlops.model import BaselinePoint, Comparison, Figures, Judgement, Summary, Verdict
from zlops.store.engine import bulk_insert
from zlops.store.models import ComparisonArchive, ComparisonRow
from zlops.store.runs import require_run


def _row(run_id: int, c: Comparison) -> dict[str, Any]:
    j = c.judgement
    return {
        "run_id": run_id, "pool": c.pool, "case": c.case, "metric": c.metric, "unit": c.unit,
        "lower_is_better": c.lower_is_better,
        "base_run_key": None if c.base is None else c.base.run_key,
        "base_sha": None if c.base is None else c.base.sha,
        "base_median": None if c.base is None else c.base.median,
        "base_n": None if c.base is None else c.base.n,
        "head_median": None if c.head is None else c.head.median,
        "head_n": None if c.head is None else c.head.n,
        "change_pct": j.change_pct, "worse_pct": j.worse_pct, "threshold_pct": j.threshold_pct,
        "verdict": Verdict(j.verdict).value, "note": j.note,
        "figures": None if j.figures is None else j.figures.to_dict(),
    }


def save_comparisons(session: Session, run_key: str, comparisons: Sequence[Comparison]) -> None:
    """Replace the comparison rows of ``run_key`` with ``comparisons`` (one DELETE, one bulk INSERT).

    Every comparison must be of the run's suite, and (pool, case, metric) must not repeat; otherwise
    StoreError (and, in the caller's transaction, nothing is changed).
    """
    run = require_run(session, run_key)
    foreign = sorted({c.suite for c in comparisons if c.suite != run.suite})
    if foreign:
        raise StoreError(f"run {run_key!r} is of suite {run.suite!r}; refusing comparisons of "
                         f"suite(s) {', '.join(foreign)}")
    conn = session.connection()
    conn.execute(delete(ComparisonRow.__table__).where(ComparisonRow.__table__.c.run_id == run.id))
    if not comparisons:
        return
    try:  # COPY / one executemany: the ORM's bulk path costs more than the rows themselves at 20,000 series
        bulk_insert(conn, ComparisonRow.__table__, [_row(run.id, c) for c in comparisons])
    except IntegrityError as exc:
        raise StoreError(f"comparisons of run {run_key!r} were refused "
                         f"(a (pool, case, metric) repeated?): {exc.orig}") from exc


_READ = ("pool", "case", "metric", "unit", "lower_is_better", "base_run_key", "base_sha", "base_median", "base_n",
         "head_median", "head_n", "change_pct", "worse_pct", "threshold_pct", "verdict", "note", "figures")


def comparisons(session: Session, run_key: str) -> list[Comparison]:
    """The saved comparisons of ``run_key``, in the order they were saved."""
    run = require_run(session, run_key)
    c = ComparisonRow.__table__.c
    rows = session.connection().execute(select(*(c[name] for name in _READ)).where(c.run_id == run.id)
                                        .order_by(c.id))
    return [comparison_from_row(run.suite, dict(zip(_READ, r, strict=True))) for r in rows]


def caliber_rows(session: Session, run_key: str, mark: str) -> list[Comparison]:
    """The run's rows that a caliber check marked: INCOMPARABLE, or a note holding ``mark`` (a mismatch
    judged anyway). What the promotion decision reads, without loading a 20,000-row table."""
    from sqlalchemy import or_

    run = require_run(session, run_key)
    c = ComparisonRow.__table__.c
    rows = session.connection().execute(
        select(*(c[name] for name in _READ))
        .where(c.run_id == run.id, or_(c.verdict == Verdict.INCOMPARABLE.value, c.note.contains(mark, autoescape=True)))
        .order_by(c.id))
    return [comparison_from_row(run.suite, dict(zip(_READ, r, strict=True))) for r in rows]


def _side(median: float | None, n: int | None, samples: Sequence[float] | None) -> Summary | None:
    """A side from its stored median and count; an archived row from before 0009 kept the raw samples."""
    if median is not None and n:
        return Summary(median, int(n))
    if samples:
        return Summary.of([float(v) for v in samples])
    return None


def comparison_from_row(suite: str, r: dict[str, Any]) -> Comparison:
    """A stored comparison row (its columns by name, as the store reads them and as
    ``benchmarks/campaign_h200/record.py --comparisons`` writes them) as the :class:`Comparison` it was."""
    base = None
    if r.get("base_run_key") is not None:
        side = _side(r.get("base_median"), r.get("base_n"), r.get("base_samples"))
        if side is not None:
            base = BaselinePoint(run_key=r["base_run_key"], sha=r.get("base_sha") or "", unit=r["unit"],
                                 median=side.median, n=side.n)
    return Comparison(
        suite=suite, pool=r["pool"], case=r["case"], metric=r["metric"], unit=r["unit"],
        lower_is_better=bool(r["lower_is_better"]), base=base,
        head=_side(r.get("head_median"), r.get("head_n"), r.get("head_samples")),
        judgement=Judgement(verdict=Verdict(r["verdict"]), change_pct=r.get("change_pct"),
                            worse_pct=r.get("worse_pct"), threshold_pct=r.get("threshold_pct"), note=r.get("note") or "",
                            figures=Figures.from_dict(r.get("figures"))))


def archive_comparisons(session: Session, run_key: str, *, reason: str, when: datetime) -> int:
    """Keep the run's current compare table in the archive (before a rescore replaces it); its revision."""
    run = require_run(session, run_key)
    current = [_row(run.id, c) for c in comparisons(session, run_key)]
    for r in current:
        r.pop("run_id")
    last = session.scalar(select(func.max(ComparisonArchive.revision)).where(ComparisonArchive.run_id == run.id))
    revision = (last or 0) + 1
    session.execute(insert(ComparisonArchive), [{"run_id": run.id, "revision": revision, "archived_at": when,
                                                 "reason": reason, "rows": current}])
    return revision


def archived_comparisons(session: Session, run_key: str) -> list[tuple[int, datetime, str, list[Comparison]]]:
    """Every archived compare table of the run, oldest first: (revision, archived_at, reason, rows)."""
    run = require_run(session, run_key)
    rows = session.scalars(select(ComparisonArchive).where(ComparisonArchive.run_id == run.id)
                           .order_by(ComparisonArchive.revision))
    return [(a.revision, a.archived_at, a.reason, [comparison_from_row(run.suite, r) for r in a.rows]) for a in rows]


def series_verdicts(session: Session, run_keys: Sequence[str], pool: str, case: str,
                    metric: str) -> dict[str, Verdict]:
    """The verdict each of ``run_keys`` gave one series (runs without a row for it are absent)."""
    from zlops.store.models import Run

    if not run_keys:
        return {}
    rows = session.execute(
        select(Run.run_key, ComparisonRow.verdict).join(ComparisonRow, ComparisonRow.run_id == Run.id)
        .where(Run.run_key.in_(list(run_keys)), ComparisonRow.pool == pool, ComparisonRow.case == case,
               ComparisonRow.metric == metric))
    return {rk: Verdict(v) for rk, v in rows}


#: verdicts that restart a series' reference (zlops.model.Verdict.changes_level)
LEVEL_CHANGE_VALUES = ("regression", "severe", "improved")
#: verdicts of nights the judge holds out of a series' history while they are unresolved (issue 22)
SUSPECT_VALUES = ("suspect", "suspect_improved")


def verdict_evidence(session: Session, run_keys: Sequence[str], *, only_evidence: bool = False,
                     ) -> dict[tuple[str, str, str, str], tuple[Verdict, Figures | None]]:
    """(run_key, pool, case, metric) -> (verdict, figures) of the compare rows of ``run_keys``.

    One query per chunk of runs, whatever the number of series: the judge reads the level changes
    and the A/B evidence of a whole window of nights at once. ``only_evidence``: only the rows the
    judge needs (a level change, a suspect, or figures that hold A/B runs or runs seen beside an A/B), so a window of a
    20,000-series suite does not parse 600,000 figures.
    """
    from sqlalchemy import String, and_, cast, or_

    from zlops.store.models import Run

    text = cast(ComparisonRow.figures, String)
    wanted = or_(ComparisonRow.verdict.in_(LEVEL_CHANGE_VALUES + SUSPECT_VALUES),
                 and_(ComparisonRow.figures.isnot(None), text.like('%"runs_head": [%'),
                      ~text.like('%"runs_head": []%')),
                 # a series measured beside an A/B's (Figures.seen_head, written only when non-empty)
                 and_(ComparisonRow.figures.isnot(None), text.like('%"seen_head": [%')))
    out: dict[tuple[str, str, str, str], tuple[Verdict, Figures | None]] = {}
    keys = list(dict.fromkeys(run_keys))
    for i in range(0, len(keys), 500):
        # the runs' ids first: a literal id list keeps the read on the comparisons' run_id index however
        # long the history (a join lets a planner scan the whole table of a year of nights)
        key_of = dict(session.execute(select(Run.id, Run.run_key).where(Run.run_key.in_(keys[i:i + 500]))).all())
        if not key_of:
            continue
        query = (select(ComparisonRow.run_id, ComparisonRow.pool, ComparisonRow.case, ComparisonRow.metric,
                        ComparisonRow.verdict, ComparisonRow.figures)
                 .where(ComparisonRow.run_id.in_(sorted(key_of))))
        rows = session.execute(query.where(wanted) if only_evidence else query)
        for rid, pool, case, metric, verdict, figures in rows:
            out[(key_of[rid], pool, case, metric)] = (Verdict(verdict), Figures.from_dict(figures))
    return out
