"""Typed domain values that flow between the pipeline's stages.

Every stage of config -> plan -> fetch/env -> run -> parse -> store -> compare -> report takes and
returns these plain frozen values, so any stage can be run, tested and re-run alone.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Any


def _require(cond: bool, cls: str, fieldname: str, expected: str, got: object) -> None:
    if not cond:
        raise ValueError(f"{cls}.{fieldname}: expected {expected}, got {got!r}")


#: What marks a recall canary's series (zlops.judge.canary): ``<source case> [canary]``, a series zlops planted
#: itself by scaling a real one; it is judged like any series and never pages anybody.
CANARY_MARK = " [canary]"
#: said in a compare row's note when tonight's harness timed the case directly where its backend offers a graph
#: timer (zlops.timing's per-shape fallback, the reason in the results' params["fallback"]): coverage names it as the
#: reason such a row is not watched, the report shows it beside the row
TIMER_FELL_BACK = "timer fell back to direct timing"


def canary_case(source_case: str) -> str:
    """The case name of the recall canary planted from ``source_case``."""
    return source_case + CANARY_MARK


def is_canary(case: str) -> bool:
    """Whether ``case`` is a recall canary's series (planted by zlops, not measured by the harness)."""
    return case.endswith(CANARY_MARK)


def canary_source(case: str) -> str:
    """The measured case a canary case was planted from (``case`` itself when it is no canary)."""
    return case[:-len(CANARY_MARK)] if is_canary(case) else case


@dataclass(frozen=True)
class CaseResult:
    """One measured series point from one shard: a case, a metric and its raw samples.

    ``case`` is the case key (operator, dtype, shape detail ...) as the harness names it;
    ``samples`` are the raw per-round values in ``unit`` (never pre-aggregated when the harness
    has rounds); ``lower_is_better`` comes from the metric registry (:mod:`zlops.metrics`).
    """

    case: str
    metric: str
    unit: str
    lower_is_better: bool
    samples: tuple[float, ...]
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require(isinstance(self.case, str) and self.case.strip() != "", "CaseResult", "case",
                 "a non-empty string", self.case)
        _require(isinstance(self.metric, str) and self.metric != "", "CaseResult", "metric",
                 "a non-empty string", self.metric)
        _require(isinstance(self.unit, str), "CaseResult", "unit", "a string", self.unit)
        _require(len(self.samples) > 0, "CaseResult", "samples", "at least one sample", self.samples)
        # no call per sample: a suite's night is 10^5-10^6 samples, nearly always plain floats
        if not all(type(v) is float for v in self.samples):
            bad = [v for v in self.samples if isinstance(v, bool) or not isinstance(v, (int, float))]
            _require(not bad, "CaseResult", "samples", "finite numbers", bad[0] if bad else None)
        values = tuple(map(float, self.samples))
        if not all(map(math.isfinite, values)):
            _require(False, "CaseResult", "samples", "finite numbers", next(v for v in values if not math.isfinite(v)))
        object.__setattr__(self, "samples", values)

    @property
    def median(self) -> float:
        return float(statistics.median(self.samples))

    @property
    def key(self) -> tuple[str, str]:
        return (self.case, self.metric)


class ShardStatus(str, Enum):
    """How one (run, pool, device) benchmark process ended."""

    OK = "ok"
    FAILED = "failed"        # non-zero exit, or its results could not be parsed
    TIMEOUT = "timeout"      # killed at the suite's timeout_s (whole process group)
    SKIPPED = "skipped"      # never started: device busy past the wait, or backend unavailable
    #: ran, but beside a busy host or a foreign device process: not judged (zlops.host.contention)
    INVALID = "invalid"


@dataclass(frozen=True)
class ShardOutcome:
    """The record of one benchmark process on one device."""

    pool: str
    device: int
    backend: str
    status: ShardStatus
    artifact_dir: Path
    exit_code: int | None
    started_at: datetime | None
    ended_at: datetime | None
    error: str | None = None
    results_file: Path | None = None

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()


class Verdict(str, Enum):
    """The judgement of one series against its baseline (issue 2's classes; issue 5 refines).

    The simple judge uses IMPROVED/UNCHANGED/POTENTIAL/REGRESSION. The noise-aware judge
    (``zlops.stats``, issue 5) uses REGRESSION for a *confirmed* change worse than potential_pct and
    SEVERE beyond regression_pct, SUSPECT for one not yet confirmed (nobody is alerted), and reports
    INVALID and UNMEASURABLE series as coverage gaps.
    """

    IMPROVED = "improved"            # better by more than potential_pct
    UNCHANGED = "unchanged"          # within +-potential_pct
    POTENTIAL = "potential"          # worse by more than potential_pct: flag for review
    REGRESSION = "regression"        # worse by more than regression_pct: highlighted
    NEW = "new"                      # no baseline yet for this series
    MISSING = "missing"              # the baseline has it, tonight produced nothing
    SUSPECT = "suspect"              # noise judge: worse beyond its threshold tonight, awaiting confirmation
    SUSPECT_IMPROVED = "suspect_improved"  # noise judge: better beyond its threshold, awaiting confirmation
    SEVERE = "severe"                # noise judge: confirmed, worse by more than regression_pct
    INVALID = "invalid"              # noise judge: throttling, heat or too few samples; not judged
    UNMEASURABLE = "unmeasurable"    # noise judge: its noise hides the target change; coverage gap
    FAILED = "failed"                # the series' benchmark failed tonight
    INCOMPARABLE = "incomparable"    # the caliber differs from the baseline's: no delta is published

    @property
    def flagged(self) -> bool:
        return self in (Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE)

    @property
    def awaiting_confirmation(self) -> bool:
        """A suspect either way: re-measure (A/B) or wait for the next night before telling anyone."""
        return self in (Verdict.SUSPECT, Verdict.SUSPECT_IMPROVED)

    @property
    def label(self) -> str:
        """How people read it: ``suspect improvement``, ``regression``..."""
        return "suspect improvement" if self is Verdict.SUSPECT_IMPROVED else self.value.replace("_", " ")

    @property
    def changes_level(self) -> bool:
        """A confirmed change: the series' reference restarts at this night."""
        return self in (Verdict.REGRESSION, Verdict.SEVERE, Verdict.IMPROVED)

    @property
    def is_gap(self) -> bool:
        """Not a judgement of the code: no baseline, no data, a coverage gap, another caliber."""
        return self in NOT_JUDGED


@dataclass(frozen=True)
class Thresholds:
    """Percent thresholds of the judge: worse than ``potential_pct`` is flagged, ``regression_pct`` highlighted."""

    potential_pct: float = 2.0
    regression_pct: float = 5.0

    def __post_init__(self) -> None:
        _require(self.potential_pct > 0, "Thresholds", "potential_pct", "a positive number",
                 self.potential_pct)
        _require(self.regression_pct >= self.potential_pct, "Thresholds", "regression_pct",
                 f"a number >= potential_pct ({self.potential_pct})", self.regression_pct)


def pct_change(reference: float, value: float) -> float:
    """``(value - reference) / |reference| * 100``: the one formula every change in zlops uses."""
    if reference == 0:
        return 0.0 if value == 0 else math.copysign(math.inf, value)
    return (value - reference) / abs(reference) * 100.0


def worse_pct(reference: float, value: float, *, lower_is_better: bool) -> float:
    """How much worse ``value`` is than ``reference``, in percent, positive = worse: a ratio, not a difference.

    ``(value / reference - 1) * 100`` for a lower-is-better metric (a time: :func:`pct_change` itself)
    and ``(reference / value - 1) * 100`` for a higher-is-better one, so a throughput falling to 15% is
    +567% worse, as loud as a 6.7x time (the plain percentage, -85%, can never pass -100%). The judge
    compares changes as log ratios (``zlops.stats.decide.worse_ratio_pct`` calls this); where a
    value is not positive the ratio means nothing and the plain oriented change is returned.
    """
    if lower_is_better or reference <= 0 or value <= 0:
        change = pct_change(reference, value)
        return change if lower_is_better else -change
    return (reference / value - 1.0) * 100.0


def worse_ci_pct(ci_pct: tuple[float, float], *, lower_is_better: bool) -> tuple[float, float]:
    """A confidence interval of a change in the raw direction (``(lo, hi)`` of ``value / reference - 1``, in
    percent) turned into the interval of :func:`worse_pct`, low first: the same for a lower-is-better metric,
    ``(1 / (1 + hi) - 1, 1 / (1 + lo) - 1)`` for a higher-is-better one (a throughput's CI of [-92.42%, -82.53%]
    is [+472.4%, +1219.4%] worse). A bound at or below -100% (no ratio) maps to +inf.
    """
    lo, hi = ci_pct
    if lower_is_better:
        return (float(lo), float(hi))

    def inv(pct: float) -> float:
        return math.inf if pct <= -100.0 else (100.0 / (100.0 + pct) - 1.0) * 100.0

    return (inv(hi), inv(lo))


def change_text(change_pct: float, worse_pct: float) -> str:
    """A change as people read it, both directions from one place: ``+3.10% worse`` where the change is the
    worse ratio itself (a time), ``-85.33% (worse by 581.2%)`` / ``+25.00% (better by 20.0%)`` where the two
    differ (a higher-is-better metric: the plain change and the ratio the judge weighs, :func:`worse_pct`); an
    improvement of a time is ``-18.74% (better)``, never "-18.74% worse"."""
    if abs(change_pct - worse_pct) <= 0.005:
        return f"{worse_pct:+.2f}% worse" if worse_pct >= 0 else f"{worse_pct:+.2f}% (better)"
    way = "worse" if worse_pct > 0 else "better"
    return f"{change_pct:+.2f}% ({way} by {abs(worse_pct):.1f}%)"


@dataclass(frozen=True)
class Figures:
    """The numbers behind one verdict: what it compared, and the change computed from exactly those two.

    ``reference`` is what tonight was compared with, named by ``reference_label`` ("median of 7
    nights", "A/B base, 8 runs", "baseline 1a2b3c4"); ``value`` is tonight's figure, named by
    ``value_label`` ("tonight, 10 samples", "A/B head, 8 runs"). :attr:`change_pct`,
    :attr:`worse_pct` and :attr:`delta` are derived from these two and nothing else, so a row can
    never disagree with itself, and every rendering (tables, Slack, alerts, pages, plots) prints
    these fields instead of recomputing anything. ``ci_pct`` is the confidence interval of the
    change (raw direction) when an A/B produced one; ``threshold_pct`` the line the judge applied;
    ``noise_pct`` the series' noise (sigma, % of the value); ``modes`` the levels of a multi-modal
    series (ascending), ``runs_base``/``runs_head`` the per-run values of an A/B (evidence kept
    for the noise model and the pages). ``follows`` names the metric whose verdict this one follows
    (a derived metric of the same case: :mod:`zlops.judge.derived`); empty for a series judged on its own.
    ``ab_noise_pct``: the noise the series' earlier interleaved A/Bs saw (the A/B's own noise, not the nights').
    """

    reference: float
    reference_label: str
    value: float
    value_label: str
    lower_is_better: bool = True
    unit: str = ""
    ci_pct: tuple[float, float] | None = None
    threshold_pct: float | None = None
    noise_pct: float | None = None
    p_value: float | None = None
    modes: tuple[float, ...] = ()
    runs_base: tuple[float, ...] = ()
    runs_head: tuple[float, ...] = ()
    follows: str = ""
    #: the series' run-to-run noise in its earlier interleaved A/Bs (sigma, %), apart from the nights' drift
    ab_noise_pct: float | None = None
    #: this series' per-run values in tonight's A/B runs of other series (the same processes measured it beside
    #: them): no verdict of its own, evidence of its A/B noise (zlops.judge.evidence.series_histories)
    seen_base: tuple[float, ...] = ()
    seen_head: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("reference", "value"):
            v = getattr(self, name)
            _require(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), "Figures",
                     name, "a finite number", v)
        _require(bool(self.reference_label), "Figures", "reference_label", "a non-empty label", self.reference_label)
        _require(bool(self.value_label), "Figures", "value_label", "a non-empty label", self.value_label)
        if self.ci_pct is not None:
            lo, hi = self.ci_pct
            _require(lo <= hi, "Figures", "ci_pct", "(low, high) with low <= high", self.ci_pct)
            object.__setattr__(self, "ci_pct", (float(lo), float(hi)))
        for name in ("modes", "runs_base", "runs_head", "seen_base", "seen_head"):
            object.__setattr__(self, name, tuple(float(v) for v in getattr(self, name)))

    @property
    def change_pct(self) -> float:
        """``(value - reference) / |reference| * 100`` in the raw direction of the metric."""
        return pct_change(self.reference, self.value)

    @property
    def worse_pct(self) -> float:
        """The change as a ratio oriented so that positive is always worse (:func:`worse_pct`): equal to
        :attr:`change_pct` for a lower-is-better metric, ``reference / value - 1`` for a higher-is-better one."""
        return worse_pct(self.reference, self.value, lower_is_better=self.lower_is_better)

    @property
    def delta(self) -> float:
        return self.value - self.reference

    def to_dict(self) -> dict[str, Any]:
        return {"reference": self.reference, "reference_label": self.reference_label, "value": self.value,
                "value_label": self.value_label, "lower_is_better": self.lower_is_better, "unit": self.unit,
                "ci_pct": None if self.ci_pct is None else list(self.ci_pct), "threshold_pct": self.threshold_pct,
                "noise_pct": self.noise_pct, "p_value": self.p_value, "modes": list(self.modes),
                "runs_base": list(self.runs_base), "runs_head": list(self.runs_head),
                **({"follows": self.follows} if self.follows else {}),
                **({"ab_noise_pct": self.ab_noise_pct} if self.ab_noise_pct is not None else {}),
                **({"seen_base": list(self.seen_base), "seen_head": list(self.seen_head)} if self.seen_head else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Figures | None:
        if not data:
            return None
        ci = data.get("ci_pct")
        return cls(reference=float(data["reference"]), reference_label=str(data["reference_label"]),
                   value=float(data["value"]), value_label=str(data["value_label"]),
                   lower_is_better=bool(data.get("lower_is_better", True)), unit=str(data.get("unit", "")),
                   ci_pct=None if ci is None else (float(ci[0]), float(ci[1])),
                   threshold_pct=data.get("threshold_pct"), noise_pct=data.get("noise_pct"),
                   p_value=data.get("p_value"), modes=tuple(data.get("modes") or ()),
                   runs_base=tuple(data.get("runs_base") or ()), runs_head=tuple(data.get("runs_head") or ()),
                   follows=str(data.get("follows") or ""), ab_noise_pct=data.get("ab_noise_pct"),
                   seen_base=tuple(data.get("seen_base") or ()), seen_head=tuple(data.get("seen_head") or ()))


@dataclass(frozen=True)
class Judgement:
    """What the judge decided for one series, with the figures it decided on.

    With ``figures``, ``change_pct`` and ``worse_pct`` are taken from them (whatever was passed),
    so the verdict's percentages and the values shown beside them come from one place.
    """

    verdict: Verdict
    change_pct: float | None          # (head - base) / base * 100, raw direction of the value
    worse_pct: float | None           # change expressed so that positive is always worse
    threshold_pct: float | None       # the threshold that was applied
    note: str = ""
    figures: Figures | None = None

    def __post_init__(self) -> None:
        if self.figures is not None:
            object.__setattr__(self, "change_pct", self.figures.change_pct)
            object.__setattr__(self, "worse_pct", self.figures.worse_pct)


@dataclass(frozen=True)
class Summary:
    """One side of a comparison as the compare table keeps it: the median of its samples and their count.

    The raw samples stay in the results table (by run, :meth:`zlops.store.Store.run_samples`); a
    compare row of a 20,000-series night carries two numbers a side instead of two JSON arrays.
    """

    median: float
    n: int

    def __post_init__(self) -> None:
        _require(isinstance(self.median, (int, float)) and not isinstance(self.median, bool)
                 and math.isfinite(self.median), "Summary", "median", "a finite number", self.median)
        _require(isinstance(self.n, int) and not isinstance(self.n, bool) and self.n >= 1, "Summary", "n",
                 "an int >= 1", self.n)
        object.__setattr__(self, "median", float(self.median))

    @classmethod
    def of(cls, samples: Sequence[float]) -> Summary:
        """The summary of raw samples (the median as :func:`median_of` takes it)."""
        return cls(median_of(samples), len(samples))


def as_summary(values: Summary | BaselinePoint | Sequence[float]) -> Summary:
    """A judge's view of one side: a :class:`Summary` as it is, a baseline's summary, or raw samples summarized."""
    if isinstance(values, Summary):
        return values
    if isinstance(values, BaselinePoint):
        return values.summary
    return Summary.of(values)


@dataclass(frozen=True)
class BaselinePoint:
    """The baseline of one series: the run it came from and its figures there (median of the run's
    samples of the series, pooled over the pool's devices, and their count)."""

    run_key: str
    sha: str
    unit: str
    median: float
    n: int

    def __post_init__(self) -> None:
        Summary(self.median, self.n)   # same checks
        object.__setattr__(self, "median", float(self.median))

    @classmethod
    def of_samples(cls, run_key: str, sha: str, unit: str, samples: Sequence[float]) -> BaselinePoint:
        s = Summary.of(samples)
        return cls(run_key, sha, unit, s.median, s.n)

    @property
    def summary(self) -> Summary:
        return Summary(self.median, self.n)


@dataclass(frozen=True)
class Comparison:
    """One row of tonight's compare table: a series, its baseline, tonight's value and the judgement."""

    suite: str
    pool: str
    case: str
    metric: str
    unit: str
    lower_is_better: bool
    base: BaselinePoint | None
    #: tonight's side (median and count of the pooled samples); None where tonight produced nothing
    head: Summary | None
    judgement: Judgement

    @property
    def figures(self) -> Figures | None:
        return self.judgement.figures

    @property
    def base_value(self) -> float | None:
        """The reference shown as "Base": the verdict's figures when it has them, else the baseline's median."""
        if self.judgement.figures is not None:
            return self.judgement.figures.reference
        return None if self.base is None else self.base.median

    @property
    def head_value(self) -> float | None:
        """The value shown as "HEAD": the verdict's figures when it has them, else tonight's median."""
        if self.judgement.figures is not None:
            return self.judgement.figures.value
        return None if self.head is None else self.head.median

    @property
    def reference_label(self) -> str | None:
        """What "Base" is ("median of 7 nights", "A/B base, 8 runs"), None without figures."""
        return None if self.judgement.figures is None else self.judgement.figures.reference_label

    @property
    def delta(self) -> float | None:
        """HEAD - Base of the figures; None where no delta may be published (no figures, another caliber)."""
        if self.judgement.verdict is Verdict.INCOMPARABLE:
            return None
        if self.judgement.figures is not None:
            return self.judgement.figures.delta
        if self.base_value is None or self.head_value is None:
            return None
        return self.head_value - self.base_value

    @property
    def verdict(self) -> Verdict:
        return self.judgement.verdict

    @property
    def follows(self) -> str:
        """The metric whose verdict this row follows (a derived metric: :mod:`zlops.judge.derived`), else ``""``.

        Such a row opens no alert and is not A/B'd on its own: its source is."""
        return self.judgement.figures.follows if self.judgement.figures is not None else ""


@dataclass(frozen=True)
class CompareSummary:
    """All comparisons of one run and the one-line overall count."""

    run_key: str
    suite: str
    sha: str
    comparisons: tuple[Comparison, ...]

    @cached_property
    def verdict_counts(self) -> Mapping[Verdict, int]:
        """How many rows have each verdict (counted once: a report asks for them dozens of times)."""
        return Counter(c.judgement.verdict for c in self.comparisons)

    def count(self, *verdicts: Verdict) -> int:
        return sum(self.verdict_counts.get(v, 0) for v in set(verdicts))

    @property
    def judged(self) -> int:
        """Cases compared with a baseline on the same caliber and judged (not gaps, not missing)."""
        return sum(n for v, n in self.verdict_counts.items() if v not in NOT_JUDGED)

    @property
    def regressed(self) -> int:
        return self.count(Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE)

    @cached_property
    def case_counts(self) -> tuple[int, int, int]:
        """(cases judged, cases improved, cases regressed): a case (its name, over pools) is judged when one of
        its series is, regressed when one of its series is flagged, improved when one improved and none is
        flagged. A FlagGems case has up to six series (latency, speedup, TFLOPS ...): people count cases."""
        judged: set[str] = set()
        improved: set[str] = set()
        regressed: set[str] = set()
        for c in self.comparisons:
            v = c.judgement.verdict
            if v in NOT_JUDGED:
                continue
            judged.add(c.case)
            if v.flagged:
                regressed.add(c.case)
            elif v is Verdict.IMPROVED:
                improved.add(c.case)
        return len(judged), len(improved - regressed), len(regressed)

    def overall_line(self) -> str:
        """``Overall: 1 of 40 cases improved, 2 regressed`` plus what is still open or not judged, so a night
        with suspects or gaps never reads as a plain "0 regressed". Cases are case names (:attr:`case_counts`);
        where a case has several series the series judged are said too, and the open or not-judged counts
        are of series."""
        cases, improved, regressed = self.case_counts
        line = f"Overall: {improved} of {cases} cases improved, {regressed} regressed"
        several = self.judged != cases or len({c.case for c in self.comparisons}) != len(self.comparisons)
        if several:
            line += f" ({self.judged} series judged)"
        extra = [f"{n} {label}" for n, label in (
            (self.count(Verdict.SUSPECT, Verdict.SUSPECT_IMPROVED), "awaiting confirmation"),
            (self.count(Verdict.UNMEASURABLE), "unmeasurable"), (self.count(Verdict.INVALID), "invalid"),
            (self.count(Verdict.INCOMPARABLE), "incomparable (caliber)"), (self.count(Verdict.FAILED), "failed"))
            if n]
        return line + (f"; {'series ' if several else ''}{', '.join(extra)}" if extra else "")

    def counts_text(self) -> str:
        """Every verdict the night holds, by weight: what a notification preview must say (issue 12)."""
        parts = [(Verdict.SEVERE, "severe"), (Verdict.REGRESSION, "regressions"), (Verdict.POTENTIAL, "potential"),
                 (Verdict.SUSPECT, "suspects"), (Verdict.SUSPECT_IMPROVED, "suspect improvements"),
                 (Verdict.IMPROVED, "improved"), (Verdict.FAILED, "failed"), (Verdict.INVALID, "invalid"),
                 (Verdict.UNMEASURABLE, "unmeasurable"), (Verdict.INCOMPARABLE, "incomparable"),
                 (Verdict.MISSING, "missing")]
        shown = [f"{self.count(v)} {label}" for v, label in parts
                 if self.count(v) or v in (Verdict.SEVERE, Verdict.REGRESSION, Verdict.POTENTIAL, Verdict.IMPROVED)]
        return f"{', '.join(shown)} of {self.judged} judged"


def class_bounds(judge: str, potential_pct: float, regression_pct: float, *, long: bool = False) -> dict[Verdict, str]:
    """What the flagged and improved classes mean under ``judge`` and its thresholds: the one place every
    count line (``confirmed, >2%``) and, with ``long``, every section title (``confirmed, worse by more than
    2%``) takes them from.

    The simple judge: potential beyond ``potential_pct``, regression beyond ``regression_pct``. The noise
    judge: a regression is a *confirmed* change beyond ``potential_pct`` (and beyond the series' own noise
    threshold), severe beyond ``regression_pct``; it has no potential class.
    """
    def words(pct: float, way: str = "worse") -> str:
        return f"{way} by more than {pct:g}%" if long else f">{pct:g}%" + ("" if way == "worse" else f" {way}")

    confirmed = "confirmed, " if judge == "noise" else ""
    regression = potential_pct if judge == "noise" else regression_pct
    return {Verdict.SEVERE: confirmed + words(regression_pct), Verdict.REGRESSION: confirmed + words(regression),
            Verdict.POTENTIAL: words(potential_pct), Verdict.IMPROVED: confirmed + words(potential_pct, "better")}


#: verdicts that are not a judgement of the code: no baseline, no data, a coverage gap, another caliber
NOT_JUDGED = frozenset({Verdict.NEW, Verdict.MISSING, Verdict.INVALID, Verdict.UNMEASURABLE, Verdict.FAILED,
                        Verdict.INCOMPARABLE})


def median_of(values: Sequence[float]) -> float:
    """Median of a non-empty sequence (one place, so every stage agrees on it)."""
    if not values:
        raise ValueError("median_of: empty sequence")
    return float(statistics.median(values))


class RunStatus(str, Enum):
    RUNNING = "running"
    DONE = "done"            # every step ran; individual shards may still have failed
    FAILED = "failed"        # the run could not complete (fetch/env failed, or no shard produced data)
    INTERRUPTED = "interrupted"  # zlops was stopped (signal) or died mid-run; its artifacts are kept


def shown_run_status(status: RunStatus, shards: Sequence[ShardStatus]) -> str:
    """The word ``zlops runs`` prints for a run: its status, except that a run that failed because every
    shard was measured beside a busy host (all INVALID: the contention gate) is ``invalid``, not ``failed``:
    nothing broke, the night could not be measured."""
    if status is RunStatus.FAILED and shards and all(s is ShardStatus.INVALID for s in shards):
        return ShardStatus.INVALID.value
    return status.value


@dataclass(frozen=True)
class RunRecord:
    """One run of a suite at one commit: a nightly, a PR compare side, or an A/B side.

    ``run_key`` is the idempotency key: an Airflow retry or a re-run step with the same key
    updates rows instead of adding them.
    """

    run_key: str
    kind: str                 # "nightly" | "pr" | "ab"
    suite: str
    sha: str
    branch: str
    status: RunStatus = RunStatus.RUNNING
    accepted: bool = False    # promoted: may serve as a baseline
    started_at: datetime | None = None
    finished_at: datetime | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require(bool(re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", self.sha)), "RunRecord", "sha",
                 "a full lower-case hex commit id", self.sha)
        _require(self.kind in ("nightly", "pr", "ab"), "RunRecord", "kind", "nightly, pr or ab", self.kind)
        _require(bool(self.run_key) and len(self.run_key) <= 250, "RunRecord", "run_key",
                 "a non-empty string of at most 250 characters", self.run_key)


@dataclass(frozen=True)
class HistoryPoint:
    """One accepted point of a series' history, oldest first when in a list (for trend plots)."""

    run_key: str
    sha: str
    when: datetime
    unit: str
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(statistics.median(self.samples))
