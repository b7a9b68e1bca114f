"""Compare a run with its baselines: one row per series (suite, pool, case, metric).

The baseline of a series is its latest accepted nightly on an ancestor commit of tonight's
(the commit itself included, other runs only). Tonight's samples of a pool are pooled over its
devices, as the baseline's are. A series the newest baseline run of its pool had but tonight lacks
is reported MISSING, so a benchmark that silently stopped producing data is seen.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from zlops import metrics
from zlops.identity import CaliberReport
from zlops.judge.derived import follow_sources
from zlops.judge.judges import DEVICE_MOVED_NOTE, JUDGES, ab_candidate
from zlops.judge.setup import JudgingSetup
from zlops.model import (
    TIMER_FELL_BACK,
    BaselinePoint,
    CaseResult,
    CompareSummary,
    Comparison,
    Judgement,
    Summary,
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
        if len(items) == 1:  # one device: its result is the series' (frozen, nothing to pool)
            out[key] = items[0][1]
            continue
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


@dataclass(frozen=True)
class JudgeInputs:
    """What a noise-aware judge needs beyond the two sides (the simple judge ignores it all)."""

    history: Mapping[SeriesKey, Sequence[float]] = field(default_factory=dict)  # accepted medians, oldest first
    telemetry: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)    # per pool, tonight
    #: (pool, baseline run key) -> caliber check of tonight's identity against that baseline's
    caliber: Mapping[tuple[str, str], CaliberReport] = field(default_factory=dict)
    allow_caliber_mismatch: bool = False
    #: pool -> why some of its shards produced nothing tonight (a missing series there is FAILED)
    failed_pools: Mapping[str, str] = field(default_factory=dict)
    #: per-run values of the series' earlier A/Bs at its current level (between-process evidence)
    processes: Mapping[SeriesKey, Sequence[float]] = field(default_factory=dict)
    #: series whose newest history night is, by its stored verdict, no unresolved suspect (issue 22)
    settled: Collection[SeriesKey] = field(default_factory=frozenset)
    #: series whose newest nights are unresolved suspects -> the newest night before them: a suspect's
    #: A/B base (zlops.judge.evidence.series_histories)
    before_pending: Mapping[SeriesKey, BaselinePoint] = field(default_factory=dict)
    #: series whose unresolved suspect nights may not be confirmed by nights alone -> why (zlops.stats.decide's
    #: hold: the first suspect night ran the code of the night before it, or an A/B of the suspect could not decide)
    hold: Mapping[SeriesKey, str] = field(default_factory=dict)
    #: per series, the noise its earlier interleaved A/Bs saw (zlops.stats.noise.ab_noise_pct), apart from
    #: the drift between nights: what an A/B of it tonight can expect to see through
    ab_noise: Mapping[SeriesKey, float] = field(default_factory=dict)


def _caliber(base: BaselinePoint, key: SeriesKey, extra: JudgeInputs) -> tuple[Judgement | None, str, bool]:
    """INCOMPARABLE when the caliber check refused this baseline (and no override), the caliber note, and
    whether the baseline ran on other physical devices than tonight (:attr:`CaliberReport.devices_moved`)."""
    report = extra.caliber.get((key[0], base.run_key))
    caliber_note = "; ".join(report.lines()) if report is not None and (report.refused or report.warnings) else ""
    moved = report is not None and report.devices_moved
    if report is not None and report.refused and not extra.allow_caliber_mismatch:
        return Judgement(Verdict.INCOMPARABLE, None, None, None, caliber_note), caliber_note, moved
    return None, caliber_note, moved   # an allowed mismatch says so in its own lines (CaliberReport.lines)


def device_moved_suspect(judgement: Judgement) -> Judgement:
    """A measured verdict of the nights (unchanged, potential, regression, severe, improved) made against a
    baseline on other devices: a suspect (or suspect improvement), so the A/B on tonight's device decides with
    its three outcomes. A night over night delta across devices carries their difference (hold-out 3 on two
    H200 leases: the same code 1.6% apart, a +3.42% change read +1.81% `unchanged`). Verdicts that are not
    measurements (new, unmeasurable, invalid, incomparable, suspects already) stay as they are."""
    measured = (Verdict.UNCHANGED, Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE, Verdict.IMPROVED)
    if judgement.verdict not in measured or judgement.worse_pct is None:
        return judgement
    verdict = Verdict.SUSPECT_IMPROVED if judgement.worse_pct < 0 else Verdict.SUSPECT
    return _with_note(replace(judgement, verdict=verdict), DEVICE_MOVED_NOTE)


def _with_note(judgement: Judgement, note: str) -> Judgement:
    return replace(judgement, note="; ".join(n for n in (judgement.note, note) if n)) if note else judgement


def _judge_all(setup: JudgingSetup, pending: list[tuple[SeriesKey, CaseResult, BaselinePoint]],
               extra: JudgeInputs) -> dict[SeriesKey, Judgement]:
    """Every pending series' judgement under the run's judging setup; the noise judge runs vectorized
    over all of them at once, the simple one series by series."""
    from zlops.judge.judges import noise_judge_many

    out: dict[SeriesKey, Judgement] = {}
    batch: list[tuple[SeriesKey, CaseResult, BaselinePoint, str]] = []
    checked: dict[tuple[str, str], tuple[Judgement | None, str, bool]] = {}  # one per (pool, baseline run)
    device_moved: set[SeriesKey] = set()
    for key, res, base in pending:
        at = (key[0], base.run_key)
        if at not in checked:
            checked[at] = _caliber(base, key, extra)
        refused, note, moved = checked[at]
        if refused is not None:
            out[key] = refused
        elif setup.judge == "noise":
            batch.append((key, res, base, note))
            if moved and setup.policy is not None and setup.policy.device_change_ab:
                device_moved.add(key)
        else:
            out[key] = _with_note(JUDGES[setup.judge](base.summary, res.samples, res.lower_is_better,
                                                      setup.thresholds), note)
    if batch:
        judged = noise_judge_many(
            [(b, r.samples, r.lower_is_better, extra.history.get(k, ()), extra.telemetry.get(k[0]),
              extra.processes.get(k, ())) for k, r, b, _ in batch], setup.thresholds, policy=setup.policy,
            settled=[k in extra.settled for k, _, _, _ in batch],
            hold=[extra.hold.get(k) for k, _, _, _ in batch])
        for (key, _, _, note), judgement in zip(batch, judged, strict=True):
            if key in extra.ab_noise and judgement.figures is not None:
                judgement = replace(judgement, figures=replace(judgement.figures, ab_noise_pct=extra.ab_noise[key]))
            if key in device_moved:
                judgement = device_moved_suspect(judgement)
            out[key] = _with_note(judgement, note)
    return out


def _ab_candidate(judgement: Judgement, setup: JudgingSetup) -> bool:
    """Whether tonight's row is one the A/B will be asked about though the nights did not call it a suspect
    (:func:`zlops.judge.judges.ab_candidate` under the run's noise policy; never under the simple judge)."""
    return setup.policy is not None and ab_candidate(judgement, setup.policy.potential_pct,
                                                     setup.policy.measurable_target_pct)


def build_comparisons(*, suite: str, pools: Sequence[str], head: dict[SeriesKey, CaseResult],
                      baselines: dict[SeriesKey, BaselinePoint], newest_baseline_run: dict[str, str],
                      setup: JudgingSetup, inputs: JudgeInputs | None = None,
                      head_summaries: Mapping[SeriesKey, Summary] | None = None) -> list[Comparison]:
    """Judge every series of tonight, plus the expected series tonight did not produce, under ``setup``
    (the judge, its thresholds and noise policy: :mod:`zlops.judge.setup`, built once per run).

    ``head_summaries``: tonight's side of each row when already computed (``Summary.of`` of its samples).

    A series whose baseline was measured on another caliber (``inputs.caliber``) is INCOMPARABLE,
    its ``!!! [caliber]`` lines in the note, unless mismatches are explicitly allowed.

    A derived metric (FlagGems ``speedup``, ``tflops``, ``gbps``: :data:`zlops.metrics.DERIVED`) then takes
    the verdict of the timing it comes from (:func:`zlops.judge.derived.follow_sources`): one verdict per measurement.
    """
    extra = inputs or JudgeInputs()
    rows: list[Comparison] = []
    pending: list[tuple[SeriesKey, CaseResult, BaselinePoint]] = []
    bases: dict[SeriesKey, BaselinePoint | None] = {}
    for key in sorted(head):
        res = head[key]
        base = baselines.get(key)
        if base is not None and base.unit != res.unit:
            base = BaselinePoint(base.run_key, base.sha, res.unit, metrics.convert(base.median, base.unit, res.unit),
                                 base.n)
        bases[key] = base
        if base is not None:
            pending.append((key, res, base))
    judged = _judge_all(setup, pending, extra)
    for key in sorted(head):
        pool, case, metric = key
        res = head[key]
        judgement = judged.get(key) or Judgement(Verdict.NEW, None, None, None,
                                                 "no accepted baseline on an ancestor commit")
        if fallback := res.params.get("fallback"):
            # the harness timed this case directly where its backend offers a graph timer (zlops.timing): the row
            # says so, and coverage names it as why a row that is not watched is not
            judgement = _with_note(judgement, f"{TIMER_FELL_BACK}: {str(fallback)[:200]}")
        side = (head_summaries or {}).get(key) or Summary.of(res.samples)
        base = bases[key]
        ref = extra.before_pending.get(key)
        if ref is not None and base is not None and ref.unit == res.unit and (
                judgement.verdict.awaiting_confirmation or _ab_candidate(judgement, setup)):
            # a suspect, or an A/B candidate, after unresolved suspect nights: its baseline (and its A/B's base) is
            # the night before them, what it was judged against, not last night's commit (which may hold the
            # change itself). A candidate too: else the night after an inconclusive A/B, reading the change inside
            # its threshold, A/Bs the change against itself, skips it as an A/A and never confirms it (hold-out 7's
            # 10-term nights: docs/statistics.md, "a ~3% change on a launch-bound shape")
            base = ref
        rows.append(Comparison(suite, pool, case, metric, res.unit, res.lower_is_better, base, side, judgement))
    for key in sorted(baselines):
        pool, case, metric = key
        base = baselines[key]
        if key in head or pool not in pools or base.run_key != newest_baseline_run.get(pool):
            continue
        lower = metrics.lower_is_better(base.unit) if metrics.has_direction(base.unit) else True
        failure = extra.failed_pools.get(pool)
        judgement = (Judgement(Verdict.FAILED, None, None, None, failure) if failure else
                     Judgement(Verdict.MISSING, None, None, None, "in the baseline but not produced tonight"))
        rows.append(Comparison(suite, pool, case, metric, base.unit, lower, base, None, judgement))
    return follow_sources(rows)


def summarize(run_key: str, suite: str, sha: str, comparisons: Sequence[Comparison]) -> CompareSummary:
    return CompareSummary(run_key, suite, sha, tuple(comparisons))
