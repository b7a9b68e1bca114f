"""Coverage: per night, suite and pool, the share of series the judge watches at the two thresholds, and why
each other series is not watched. Pure: stored compare rows in, frozen values and text out.

A row counts unless it is ``new`` (no baseline yet is not a gap), a recall canary's (zlops' own series) or a
derived row (it follows its source, :mod:`zlops.judge.derived`: its source is counted, not it). At a threshold
``X`` (the config's ``potential_pct`` and ``regression_pct``, passed as :class:`zlops.model.Thresholds`) a row is

- **watched through the A/B** when tonight's A/B decided it (A/B runs in its figures and the verdict unchanged,
  regression, severe or improved: its threshold is then the question put to the A/B, not the nights' own);
- **watched by the nights**: a judged verdict (unchanged, suspect either way, regression, severe, improved,
  potential) whose applied threshold (``judgement.threshold_pct``) is at most ``X``, whose figures carry no
  process levels (``figures.modes``) and whose noise model is not provisional (fewer than ``min_nights`` nights:
  its threshold is the floor because the noise is not known yet, "too few nights");
- else **watched through the A/B** when its earlier interleaved A/Bs' noise (``figures.ab_noise_pct``) is small
  enough that an A/B would see ``X`` (:data:`zlops.judge.judges.AB_NOISE_K` x it at most ``X``), for a row the
  A/B is asked about (:func:`zlops.judge.judges.ab_candidate`: measured tonight, not judged by its levels);
- else **not watched**, for the first reason of :data:`REASONS` that applies.

Every rendering takes the figure from here: the report's lines and the Slack summary's (:func:`pool_lines`,
:func:`night_line`), the coverage page (:func:`row_watch` per row), the run meta the next night compares with
(:func:`to_meta`, :func:`from_meta`, :func:`drop_line`) and the trust ledger (:func:`summed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from zlops.judge.judges import AB_NOISE_K
from zlops.model import TIMER_FELL_BACK, Comparison, Thresholds, Verdict, is_canary

#: verdicts reached on tonight's measurement: watched by the nights at their threshold
JUDGED = frozenset({Verdict.UNCHANGED, Verdict.SUSPECT, Verdict.SUSPECT_IMPROVED, Verdict.REGRESSION, Verdict.SEVERE,
                    Verdict.IMPROVED, Verdict.POTENTIAL})
#: verdicts an A/B of tonight decides (with its runs in the figures)
AB_DECIDED = frozenset({Verdict.UNCHANGED, Verdict.REGRESSION, Verdict.SEVERE, Verdict.IMPROVED})
#: what :func:`row_watch` answers for a watched row
NIGHTS, AB = "nights", "A/B"
#: why a row is not watched at a threshold, in the order tried (the first that applies). "timer fell back": the
#: harness timed the case directly where its backend offers a graph timer (zlops.timing's per-shape fallback; the
#: compare row's note says so, :data:`zlops.model.TIMER_FELL_BACK`): the launch path it then measures is what hides
#: the change, so it is named before the noise it causes.
REASONS = ("invalid", "missing", "failed", "incomparable", "timer fell back", "levels", "too few nights",
           "noise (A/B too)", "noise", "unmeasurable")
_GAPS = {Verdict.INVALID: "invalid", Verdict.MISSING: "missing", Verdict.FAILED: "failed",
         Verdict.INCOMPARABLE: "incomparable"}
#: a fall of the share watched at the upper threshold by more than this many points against the previous
#: night of the same suite and pool is said
DROP_POINTS = 5.0
#: the run meta key the night's coverage is stored under (at report time), and its format's version
META_KEY = "coverage"
SCHEMA_VERSION = 1


def derived(c: Comparison) -> bool:
    """Whether ``c`` follows another row (its figures name the source; a row whose source gave no figures says
    ``follows ...`` in its note, :mod:`zlops.judge.derived`)."""
    return bool(c.follows) or c.judgement.note.startswith("follows ")


def counted(c: Comparison) -> bool:
    """Whether ``c`` counts towards coverage: not new, not a recall canary's, not derived."""
    return c.verdict is not Verdict.NEW and not is_canary(c.case) and not derived(c)


def row_watch(c: Comparison, pct: float, *, judge: str = "noise") -> str:
    """How a counted row is watched at ``pct``: :data:`NIGHTS`, :data:`AB`, or the reason (:data:`REASONS`) it
    is not. See the module docstring. Under the ``simple`` judge (fixed thresholds: its ``threshold_pct`` is the
    class boundary a row crossed, 5% for a regression) every judged verdict is watched at both."""
    j, f = c.judgement, c.figures
    levels = f is not None and bool(f.modes)
    if j.verdict in JUDGED and judge == "simple":
        return NIGHTS
    if f is not None and f.runs_head and j.verdict in AB_DECIDED:
        # the A/B's verdict and figures: its threshold is the question put to the A/B (the floor, for a candidate),
        # not the nights' own, so the row is the A/B's whatever that threshold
        return AB
    provisional = "provisional" in j.note
    if (j.verdict in JUDGED and j.threshold_pct is not None and j.threshold_pct <= pct and not levels
            and not provisional):
        # a provisional noise model (fewer than min_nights nights) reads the floor for a threshold: the series'
        # process-to-process behaviour is not known yet, so the nights do not watch it at that line yet
        return NIGHTS
    if j.verdict in _GAPS:
        return _GAPS[j.verdict]
    ab_noise = f.ab_noise_pct if f is not None else None
    if ab_noise is not None and not levels and AB_NOISE_K * ab_noise <= pct:
        return AB
    if TIMER_FELL_BACK in j.note:
        return "timer fell back"
    if levels:
        return "levels"
    if provisional:
        return "too few nights"
    if j.threshold_pct is not None and j.threshold_pct > pct:
        return "noise (A/B too)" if ab_noise is not None else "noise"
    return "unmeasurable"


@dataclass(frozen=True)
class AtThreshold:
    """A pool's series at one threshold: how many are watched, how many of them only through the A/B, and
    the others per reason (:data:`REASONS` order, only reasons that occur)."""

    pct: float
    watched: int
    through_ab: int = 0
    why: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Coverage:
    """One night's coverage of a suite's pool (``pool`` ``""``: several pools summed). ``total`` rows count;
    ``derived`` and ``new`` rows were left out (canary rows are not counted at all)."""

    suite: str
    pool: str
    total: int
    low: AtThreshold          # at potential_pct
    high: AtThreshold         # at regression_pct
    derived: int = 0
    new: int = 0

    def share(self, at: AtThreshold) -> float | None:
        return at.watched / self.total if self.total else None

    @property
    def share_low(self) -> float | None:
        return self.share(self.low)

    @property
    def share_high(self) -> float | None:
        return self.share(self.high)


def _at(rows: Sequence[Comparison], pct: float, judge: str) -> AtThreshold:
    how = [row_watch(c, pct, judge=judge) for c in rows]
    why = {r: n for r in REASONS if (n := how.count(r))}
    return AtThreshold(pct, how.count(NIGHTS) + how.count(AB), how.count(AB), why)


def pool_coverage(rows: Iterable[Comparison], thresholds: Thresholds, *, judge: str = "noise") -> list[Coverage]:
    """Each pool's coverage of a night's compare rows at ``thresholds`` under ``judge`` (the run's judging setup),
    pools sorted: the one pure function behind every rendering."""
    by: dict[tuple[str, str], list[Comparison]] = {}
    for c in rows:
        if not is_canary(c.case):
            by.setdefault((c.suite, c.pool), []).append(c)
    out = []
    for (suite, pool), items in sorted(by.items()):
        kept = [c for c in items if counted(c)]
        out.append(Coverage(suite, pool, len(kept), _at(kept, thresholds.potential_pct, judge),
                            _at(kept, thresholds.regression_pct, judge), derived=sum(1 for c in items if derived(c)),
                            new=sum(1 for c in items if c.verdict is Verdict.NEW and not derived(c))))
    return out


def summed(items: Sequence[Coverage], *, suite: str = "", pool: str = "") -> list[Coverage]:
    """Coverages added up, one per pair of thresholds (nights judged at other thresholds are not added
    together), in order of first appearance."""
    groups: dict[tuple[float, float], list[Coverage]] = {}
    for c in items:
        groups.setdefault((c.low.pct, c.high.pct), []).append(c)
    return [Coverage(suite, pool, sum(c.total for c in members), _added(low, [c.low for c in members]),
                     _added(high, [c.high for c in members]), sum(c.derived for c in members),
                     sum(c.new for c in members))
            for (low, high), members in groups.items()]


def _added(pct: float, ats: Sequence[AtThreshold]) -> AtThreshold:
    why: dict[str, int] = {}
    for a in ats:
        for r, n in a.why.items():
            why[r] = why.get(r, 0) + n
    known = [r for r in REASONS if why.get(r)] + sorted(r for r in why if r not in REASONS)   # a newer zlops' too
    return AtThreshold(pct, sum(a.watched for a in ats), sum(a.through_ab for a in ats), {r: why[r] for r in known})


def _share(share: float | None) -> str:
    """A share in whole percent, one decimal where whole percent would read as all or none (99.6%, 0.4%)."""
    if share is None:
        return "—"
    text = f"{share:.0%}"
    return f"{share:.1%}" if (text == "100%" and share < 1) or (text == "0%" and share > 0) else text


def coverage_line(c: Coverage) -> str:
    """``coverage: 41/50 watched at 5% (82%; 6 through the A/B), 22/50 at 2% (44%); not at 5%: noise 5,
    levels 3, too few nights 1``."""
    if not c.total:
        return f"coverage: no series to watch ({c.new} new without a baseline)" if c.new else \
            "coverage: no series to watch"

    def part(at: AtThreshold, first: bool) -> str:
        ab = f"; {at.through_ab} through the A/B" if at.through_ab else ""
        return f"{at.watched}/{c.total}{' watched' if first else ''} at {at.pct:g}% ({_share(c.share(at))}{ab})"

    line = f"coverage: {part(c.high, True)}, {part(c.low, False)}"
    if c.high.why:
        line += f"; not at {c.high.pct:g}%: " + ", ".join(f"{r} {n}" for r, n in c.high.why.items())
    return line


def drop_line(now: Coverage, before: Coverage | None) -> str | None:
    """``coverage fell: 82% -> 61% at 5%: 12 series to noise`` when the share watched at the upper threshold
    fell by more than :data:`DROP_POINTS` against ``before`` (the previous night of the suite and pool, at the
    same thresholds); None otherwise. The reasons named are those that took more series than the night before."""
    if before is None or (before.low.pct, before.high.pct) != (now.low.pct, now.high.pct):
        return None
    was, share = before.share_high, now.share_high
    if was is None or share is None or (was - share) * 100.0 <= DROP_POINTS:
        return None
    rose = sorted(((n - before.high.why.get(r, 0), r) for r, n in now.high.why.items()
                   if n > before.high.why.get(r, 0)),
                  key=lambda t: (-t[0], REASONS.index(t[1]) if t[1] in REASONS else len(REASONS), t[1]))
    to = ", ".join(f"{n} to {r}" if i else f"{n} series to {r}" for i, (n, r) in enumerate(rose))
    return f"coverage fell: {_share(was)} -> {_share(share)} at {now.high.pct:g}%" + (f": {to}" if to else "")


def pool_lines(night: Sequence[Coverage], before: Mapping[str, Coverage] | None = None) -> list[str]:
    """The report's lines: one per pool (``pool: coverage: ...``), then a pool's fall, where it fell."""
    before = before or {}
    out = []
    for c in night:
        out.append(f"{c.pool}: {coverage_line(c)}")
        fell = drop_line(c, before.get(c.pool))
        if fell:
            out.append(f"{c.pool}: {fell}")
    return out


def night_line(night: Sequence[Coverage], before: Mapping[str, Coverage] | None = None) -> str:
    """The Slack summary's one line: the night's pools added up (named when one), and each pool's fall."""
    if not night:
        return "coverage: no series compared"
    sums = summed(night)
    if len(night) == 1:
        text = f"{night[0].pool}: {coverage_line(night[0])}"
    else:
        text = "; ".join(f"{len(night)} pools: {coverage_line(s)}" for s in sums)
    falls = [f"{c.pool}: {fell}" for c in night if (fell := drop_line(c, (before or {}).get(c.pool)))]
    return text + "".join(f" · {f}" for f in falls)


def to_meta(night: Sequence[Coverage]) -> dict[str, Any]:
    """The night's coverage as the run meta keeps it (``meta["coverage"]``): per pool, its counts at both
    thresholds (one read of a run gives the next night its comparison and the ledger its sums)."""
    return {"schema_version": SCHEMA_VERSION, "pools": {c.pool: {
        "total": c.total, "derived": c.derived, "new": c.new,
        "at": [{"pct": a.pct, "watched": a.watched, "through_ab": a.through_ab, "why": dict(a.why)}
               for a in (c.low, c.high)]} for c in night}}


def readable(meta: Any) -> bool:
    """Whether ``meta`` is a night's coverage this zlops reads (:func:`to_meta`'s format)."""
    return isinstance(meta, Mapping) and meta.get("schema_version") == SCHEMA_VERSION


def from_meta(meta: Mapping[str, Any] | None, suite: str = "") -> list[Coverage]:
    """The coverages a run stored (:func:`to_meta`); [] for a run that stored none or another format."""
    if not readable(meta):
        return []
    out = []
    for pool, raw in sorted((meta.get("pools") or {}).items()):
        try:
            low, high = (AtThreshold(float(a["pct"]), int(a["watched"]), int(a.get("through_ab", 0)),
                                     {str(r): int(n) for r, n in (a.get("why") or {}).items()}) for a in raw["at"])
            out.append(Coverage(suite, str(pool), int(raw["total"]), low, high, int(raw.get("derived", 0)),
                                int(raw.get("new", 0))))
        except (KeyError, TypeError, ValueError):
            continue   # a pool this zlops cannot read: no comparison, never a wrong one
    return out


def previous(metas: Iterable[Mapping[str, Any]], suite: str = "") -> dict[str, Coverage]:
    """Per pool, the newest stored coverage among ``metas`` (run metas, newest first): the previous night."""
    out: dict[str, Coverage] = {}
    for meta in metas:
        for c in from_meta(meta.get(META_KEY) if isinstance(meta, Mapping) else None, suite):
            out.setdefault(c.pool, c)
    return out
