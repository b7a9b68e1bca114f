"""Compare a run with its baselines: one row per series (suite, pool, case, metric).

The baseline of a series is its latest accepted nightly on an ancestor commit of tonight's
(the commit itself included, other runs only). Tonight's samples of a pool are pooled over its
devices, as the baseline's are. A series the newest baseline run of its pool had but tonight lacks
is reported MISSING, so a benchmark that silently stopped producing data is seen.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

from zlops import metrics
from zlops.judge import Judge
from zlops.model import (
    BaselinePoint,
    CaseResult,
    CompareSummary,
    Comparison,
    Judgement,
    Thresholds,
    Verdict,
)

SeriesKey = tuple[str, str, str]  # (pool, case, metric)


def pool_results(rows: Iterable[tuple[str, int, CaseResult]]) -> dict[SeriesKey, CaseResult]:
    """Tonight's results per series, samples concatenated over the pool's devices (device order)."""
    grouped: dict[SeriesKey, list[tuple[int, CaseResult]]] = defaultdict(list)
    for pool, device, res in rows:
        grouped[(pool, res.case, res.metric)].append((device, res))
    out: dict[SeriesKey, CaseResult] = {}
    for key, items in grouped.items():
        items.sort(key=lambda t: t[0])
        first = items[0][1]
        samples: list[float] = []
        for _, r in items:
            samples.extend(r.samples if r.unit == first.unit else
                           (metrics.convert(v, r.unit, first.unit) for v in r.samples))
        out[key] = CaseResult(first.case, first.metric, first.unit, first.lower_is_better, tuple(samples),
                              dict(first.params))
    return out


def pick_baselines(candidates: Sequence[tuple[str, str, str, BaselinePoint, datetime]],
                   ) -> tuple[dict[SeriesKey, BaselinePoint], dict[str, str]]:
    """First (newest) candidate per series, and per pool the run key of its newest baseline run."""
    chosen: dict[SeriesKey, BaselinePoint] = {}
    newest_run: dict[str, tuple[datetime, str]] = {}
    for pool, case, metric, point, finished in candidates:
        chosen.setdefault((pool, case, metric), point)
        if pool not in newest_run or finished > newest_run[pool][0]:
            newest_run[pool] = (finished, point.run_key)
    return chosen, {pool: rk for pool, (_, rk) in newest_run.items()}


def build_comparisons(*, suite: str, pools: Sequence[str], head: dict[SeriesKey, CaseResult],
                      baselines: dict[SeriesKey, BaselinePoint], newest_baseline_run: dict[str, str],
                      judge: Judge, thresholds: Thresholds) -> list[Comparison]:
    """Judge every series of tonight, plus the expected series tonight did not produce."""
    rows: list[Comparison] = []
    for key in sorted(head):
        pool, case, metric = key
        res = head[key]
        base = baselines.get(key)
        if base is None:
            judgement = Judgement(Verdict.NEW, None, None, None, "no accepted baseline on an ancestor commit")
        else:
            if base.unit != res.unit:
                base = BaselinePoint(base.run_key, base.sha, res.unit,
                                     tuple(metrics.convert(v, base.unit, res.unit) for v in base.samples))
            judgement = judge(base.samples, res.samples, res.lower_is_better, thresholds)
        rows.append(Comparison(suite, pool, case, metric, res.unit, res.lower_is_better, base, res.samples,
                               judgement))
    for key in sorted(baselines):
        pool, case, metric = key
        base = baselines[key]
        if key in head or pool not in pools or base.run_key != newest_baseline_run.get(pool):
            continue
        lower = metrics.lower_is_better(base.unit) if metrics.has_direction(base.unit) else True
        rows.append(Comparison(suite, pool, case, metric, base.unit, lower, base, None,
                               Judgement(Verdict.MISSING, None, None, None,
                                         "in the baseline but not produced tonight")))
    return rows


def summarize(run_key: str, suite: str, sha: str, comparisons: Sequence[Comparison]) -> CompareSummary:
    return CompareSummary(run_key, suite, sha, tuple(comparisons))
