"""One verdict per measurement: a derived metric takes the verdict of the timing it is computed from.

FlagGems reports ``speedup`` (torch's time over FlagGems'), ``tflops`` and ``gbps`` beside ``latency``:
all of them come from one timing of one process, so judged on their own they can only disagree with it
by noise (``speedup`` also carries torch's noise). The registry declares which metric follows which
(:data:`zlops.metrics.DERIVED`); :func:`follow_sources` applies it to a night's comparison rows after
judging and after any A/B, so every rendering (reports, Slack, the inbox, series pages, alerts) prints one
verdict per measurement:

- the derived row gets its source's verdict, threshold and note, and figures whose change is the
  source's change as a ratio: a rate moves as ``1 / time``, so a latency ``+3.00%`` is a speedup
  ``-2.91%`` (``value`` is tonight's own median, ``reference`` the one the source's ratio implies);
- its figures name the source (:attr:`zlops.model.Figures.follows`), so the row is not A/B'd on its own
  and opens no alert (:mod:`zlops.alerts.lifecycle`): its source does;
- a row whose source series is absent tonight (no such metric for the case, or nothing measured) keeps
  its own verdict.

A campaign's derived series (:mod:`zlops.campaign.scaling`: efficiency at P, stack ratios) come from two cases'
timings; they follow those the same way (:func:`campaign_sources`, :func:`_combined`): their change is the
product of their sources' ratios, their class the strongest of their sources'. Measured on the H200x2
noise nights (tests/data/campaign_h200x2/noise_2026-12-01, night 3): the slowed ``p2/tree/nccl`` timing
confirmed +98.82% with ``p1/tree/nccl`` unchanged (-0.10%) gives efficiency -49.75% confirmed severe
(judged on its own, one sample a night, it needed its own A/B: -50.66%); the untouched efficiency and
ratio rows whose P=1 timing was unmeasurable are unmeasurable, as judged on their own, without an A/B.

Such a row carries no threshold of its own: composed from its sources' (on the CPU gloo hold-out, run 7, a P=1
timing on 448% noise gave its efficiency "threshold 70112713%") it is a number no change could ever reach. A
campaign row with an unmeasurable source, or whose composed threshold is not finite or beyond
:data:`MAX_THRESHOLD_PCT`, is ``unmeasurable`` and its note names the sources and what hides their change
("unmeasurable: its source is (allreduce/1MiB/p1/ring/ring execute_s: noise 448.68% x k=3: threshold 70112713%)");
a row that follows one source never shows a threshold beyond that line either.

A reference implementation's own timing (FlagGems ``latency_base``) is not derived: it keeps its own verdict.
Pure: rows in, new rows out; applying it twice gives the same rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from zlops import metrics
from zlops.model import Comparison, Figures, Judgement, Verdict

__all__ = ["MAX_THRESHOLD_PCT", "campaign_sources", "follow_sources", "follows_source"]

#: the widest threshold a derived row may carry, as a worse ratio in %: 100% is a factor 2, a line only a halving
#: or a doubling crosses; beyond it the row could call nothing a change (its efficiency or time ratio would have
#: to fall by more than half) and the figure only misleads. A composed threshold past it makes the row unmeasurable.
MAX_THRESHOLD_PCT = 100.0

SeriesKey = tuple[str, str, str]  # (pool, case, metric)
_EFF = re.compile(r"^efficiency_p(\d+)$")      # zlops.campaign.scaling's series names
_RATIO = re.compile(r"^ratio_(.+)_over_(.+)$")


def follows_source(c: Comparison) -> bool:
    """Whether ``c`` takes its verdict from another row (and so is neither A/B'd nor alerted on its own)."""
    return bool(c.follows)


def _ratio_ci(ci: tuple[float, float] | None, power: int) -> tuple[float, float] | None:
    """A change's CI (raw direction, percent) carried through ``x ** power``."""
    if ci is None:
        return None
    ends = []
    for pct in ci:
        base = 1.0 + pct / 100.0
        if base <= 0:
            return None
        ends.append((base ** power - 1.0) * 100.0)
    return (min(ends), max(ends))


def _within_line(threshold_pct: float | None) -> float | None:
    """``threshold_pct`` when a derived row may show it (finite, at most :data:`MAX_THRESHOLD_PCT`), else None."""
    if threshold_pct is None or not math.isfinite(threshold_pct) or threshold_pct > MAX_THRESHOLD_PCT:
        return None
    return threshold_pct


def _followed(c: Comparison, src: Comparison, rule: metrics.Derived) -> Judgement:
    s = replace(src.judgement, threshold_pct=_within_line(src.judgement.threshold_pct))
    note = f"follows {src.metric} ({rule.formula})" + (f": {s.note}" if s.note else "")
    f = s.figures
    ratio = None
    if f is not None and f.reference > 0 and f.value > 0:
        ratio = f.value / f.reference
    elif s.change_pct is not None and math.isfinite(s.change_pct) and s.change_pct > -100.0:
        ratio = 1.0 + s.change_pct / 100.0
    if ratio is None or c.head is None:
        return Judgement(s.verdict, None, None, s.threshold_pct, note)
    own = ratio ** rule.power
    value = c.head.median
    reference = value / own
    if not (math.isfinite(reference) and math.isfinite(value)):
        return Judgement(s.verdict, None, None, s.threshold_pct, note)
    label = f.reference_label if f is not None else "its reference"
    figures = Figures(reference=reference, reference_label=f"{label}, through {src.metric}", value=value,
                      value_label=f"tonight, {c.head.n} sample{'s' if c.head.n != 1 else ''}",
                      lower_is_better=c.lower_is_better, unit=c.unit,
                      ci_pct=_ratio_ci(f.ci_pct if f is not None else None, rule.power),
                      threshold_pct=s.threshold_pct, noise_pct=f.noise_pct if f is not None else None,
                      p_value=f.p_value if f is not None else None, follows=src.metric)
    return Judgement(s.verdict, None, None, s.threshold_pct, note, figures=figures)


def _ratio(j: Judgement) -> float | None:
    """A judgement's change as a ratio (value / reference), from its figures, else from its change."""
    f = j.figures
    if f is not None and f.reference > 0 and f.value > 0:
        return f.value / f.reference
    if j.change_pct is not None and math.isfinite(j.change_pct) and j.change_pct > -100.0:
        return 1.0 + j.change_pct / 100.0
    return None


def campaign_sources(c: Comparison, by_key: Mapping[SeriesKey, Comparison]) -> list[tuple[Comparison, int]] | None:
    """The measured rows a campaign's derived row is computed from, each with its power
    (:mod:`zlops.campaign.scaling`): efficiency ``E(P) = t(P_min) * P_min / (t(P) * P)`` -> ``[(t(P_min), +1),
    (t(P), -1)]`` (``P_min`` the smallest P measured tonight); stack ratio ``t(num) / t(den)`` ->
    ``[(t(num), +1), (t(den), -1)]``. The timing metric is the campaign's ``scaling_metric``: the one whose
    tonight's medians give the derived row's own value tonight (``execute_s`` tried first). None for another
    row, or when no metric of the source cases reproduces its value."""
    eff, ratio = _EFF.match(c.metric), _RATIO.match(c.metric)
    if c.head is None or (eff is None and ratio is None):
        return None
    if eff is not None:
        parts = c.case.rsplit("/", 2)
        if len(parts) != 3:
            return None
        stem, variant, stack = parts
        p = int(eff.group(1))
        shape = re.compile(rf"^{re.escape(stem)}/p(\d+)/{re.escape(variant)}/{re.escape(stack)}$")
        found = [(int(m.group(1)), name) for pool, case, name in by_key
                 if pool == c.pool and (m := shape.match(case)) is not None]
        names = {name for _, name in found}
        for metric in sorted(names, key=lambda n: (n != "execute_s", n)):
            ps = sorted(q for q, name in found if name == metric)
            if not ps or ps[0] >= p:
                continue
            t_min = by_key.get((c.pool, f"{stem}/p{ps[0]}/{variant}/{stack}", metric))
            t_p = by_key.get((c.pool, f"{stem}/p{p}/{variant}/{stack}", metric))
            if t_min is not None and t_p is not None and _reproduces(c, [(t_min, 1), (t_p, -1)], ps[0] / p):
                return [(t_min, 1), (t_p, -1)]
        return None
    assert ratio is not None
    prefix = f"{c.case}/"
    for metric in sorted({name for pool, case, name in by_key if pool == c.pool and case.startswith(prefix)},
                         key=lambda n: (n != "execute_s", n)):
        num = by_key.get((c.pool, f"{prefix}{ratio.group(1)}", metric))
        den = by_key.get((c.pool, f"{prefix}{ratio.group(2)}", metric))
        if num is not None and den is not None and _reproduces(c, [(num, 1), (den, -1)], 1.0):
            return [(num, 1), (den, -1)]
    return None


def _reproduces(c: Comparison, sources: list[tuple[Comparison, int]], factor: float) -> bool:
    """Whether tonight's medians of ``sources`` give ``c``'s own value tonight (the derivation it came from)."""
    value = factor
    for s, power in sources:
        if s.head is None or s.head.median <= 0:
            return False
        value *= s.head.median ** power
    return c.head is not None and math.isclose(value, c.head.median, rel_tol=1e-6)


#: how strongly a source's verdict speaks, strongest first (a derived row of several sources takes the strongest)
_CONFIRMED = (Verdict.SEVERE, Verdict.REGRESSION, Verdict.IMPROVED)


def _combined(c: Comparison, sources: list[tuple[Comparison, int]]) -> Judgement | None:
    """The verdict of a row derived from several timings (a campaign's efficiency or stack ratio).

    A source that is not judged (unmeasurable, invalid, new ...) makes the row so. Otherwise its change is
    the product of its sources' ratios (each to its power); beyond the largest of their thresholds (as a
    ratio, either way) it takes the strongest class among its sources (confirmed > potential > suspect)
    in its own direction: a 2x slower P=2 confirmed makes the efficiency at P=2 a confirmed regression;
    within it, or with every source unchanged, it is unchanged (both P slowed alike: efficiency held).
    """
    names = " and ".join(f"{s.metric} of {s.case}" for s, _ in sources)
    gaps = [s for s, _ in sources if s.verdict.is_gap]
    if gaps:
        bounded = _bounded(c, sources, names)
        if bounded is not None:
            return bounded
        g = gaps[0]
        if g.verdict is Verdict.UNMEASURABLE:
            return _unmeasurable(names, [s for s in gaps if s.verdict is Verdict.UNMEASURABLE])
        why = f"follows {names}: {g.case} is {g.verdict.label}" + (f" ({g.judgement.note})" if g.judgement.note else "")
        return Judgement(g.verdict, None, None, _within_line(g.judgement.threshold_pct), why)
    own = 1.0
    for s, power in sources:
        r = _ratio(s.judgement)
        if r is None:
            return None
        own *= r ** power
    if c.head is None or not math.isfinite(own) or own <= 0:
        return None
    wide = [s for s, _ in sources if _within_line(s.judgement.threshold_pct or 0.0) is None]
    if wide:   # a source's line past MAX_THRESHOLD_PCT (or not finite): so is the row's, no change could cross it
        return _unmeasurable(names, wide)
    threshold = (max((s.judgement.threshold_pct or 0.0 for s, _ in sources), default=0.0)
                 or _within_line(c.judgement.threshold_pct) or 2.0)
    line = 1.0 + threshold / 100.0
    beyond = own >= line or own <= 1.0 / line
    worse = (own > 1.0) == c.lower_is_better
    verdicts = {s.verdict for s, _ in sources}
    if not beyond or verdicts <= {Verdict.UNCHANGED}:
        verdict = Verdict.UNCHANGED
    elif verdicts & set(_CONFIRMED):
        verdict = (Verdict.SEVERE if Verdict.SEVERE in verdicts else Verdict.REGRESSION) if worse else Verdict.IMPROVED
    elif Verdict.POTENTIAL in verdicts:
        verdict = Verdict.POTENTIAL if worse else Verdict.IMPROVED
    elif verdicts & {Verdict.SUSPECT, Verdict.SUSPECT_IMPROVED}:
        verdict = Verdict.SUSPECT if worse else Verdict.SUSPECT_IMPROVED
    else:
        verdict = Verdict.UNCHANGED
    value = c.head.median
    figures = Figures(reference=value / own, reference_label=f"its sources' references ({names})", value=value,
                      value_label=f"tonight, {c.head.n} sample{'s' if c.head.n != 1 else ''}",
                      lower_is_better=c.lower_is_better, unit=c.unit, threshold_pct=threshold, follows=names)
    parts = "; ".join(f"{s.case} {s.verdict.label} {(_ratio(s.judgement) or 1.0) * 100 - 100:+.2f}%"
                      for s, _ in sources)
    return Judgement(verdict, None, None, threshold, f"follows its sources: {parts}", figures=figures)


#: where a source's own note says what hides its change: "noise 41.04% x k=3: threshold 242.53% hides a 5% change ...",
#: "bimodal 4.621e-05/0.007171 (levels of 5 processes, 13177% apart): unmeasurable at 2%; ..." (zlops.stats.decide)
_HIDES = (" hides a ", ": unmeasurable")


def _what_hides(s: Comparison) -> str:
    """What keeps source ``s`` from showing a change: an unmeasurable one's judge's words (its note up to
    "hides a ..."); else its verdict, its noise and whether its line is past :data:`MAX_THRESHOLD_PCT`."""
    lines = s.judgement.note.strip().splitlines()
    note = lines[0] if lines else ""
    ends = [at for at in (note.find(end) for end in _HIDES) if at > 0]
    if s.verdict is Verdict.UNMEASURABLE and ends:
        return note[:min(ends)]
    f = s.judgement.figures
    words = [s.verdict.label]
    if f is not None and f.noise_pct is not None:
        words.append(f"noise {f.noise_pct:.2f}%")
    if s.judgement.threshold_pct is not None and _within_line(s.judgement.threshold_pct) is None:
        words.append(f"threshold beyond {MAX_THRESHOLD_PCT:g}%")
    return ", ".join(words)


def _unmeasurable(names: str, culprits: Sequence[Comparison]) -> Judgement:
    """A derived row no change could be seen on: ``unmeasurable``, no threshold, its note naming the sources
    that make it so and what hides their change (never the threshold composed from theirs)."""
    listed = ", ".join(f"({s.case} {s.metric}: {_what_hides(s)})" for s in culprits)
    which = "its source is" if len(culprits) == 1 else "its sources are"
    return Judgement(Verdict.UNMEASURABLE, None, None, None, f"follows {names}: unmeasurable: {which} {listed}")


def _band(s: Comparison) -> tuple[float, float, str] | None:
    """Where a source's true change (a ratio) can lie, with how that was found: a confirmed source's A/B
    CI (else its change within its threshold); an ``unmeasurable`` one's change widened by its threshold
    (its noise times k) and, for a series on several process levels, by the span of its levels. None when
    the source has no change to bound."""
    j, f = s.judgement, s.judgement.figures
    r = _ratio(j)
    thr = j.threshold_pct if j.threshold_pct is not None and math.isfinite(j.threshold_pct) else None
    if r is None or thr is None or thr < 0:
        return None
    if s.verdict in _CONFIRMED and f is not None and f.ci_pct is not None and f.ci_pct[0] > -100.0:
        return 1.0 + f.ci_pct[0] / 100.0, 1.0 + f.ci_pct[1] / 100.0, f"A/B CI [{f.ci_pct[0]:+.2f}%, {f.ci_pct[1]:+.2f}%]"
    modes = f.modes if f is not None else ()
    span = max(modes) / min(modes) if len(modes) >= 2 and min(modes) > 0 else 1.0
    widen = (1.0 + thr / 100.0) * span
    levels = f", levels {span:.3g}x apart" if span > 1.0 else ""
    return (r / widen, r * widen,
            f"{r * 100 - 100:+.2f}% give or take a factor {widen:.3g} (threshold {thr:.2f}%{levels})")


def _bounded(c: Comparison, sources: list[tuple[Comparison, int]], names: str) -> Judgement | None:
    """A derived row with a confirmed source and ``unmeasurable`` ones: confirmed (in its own direction, as
    :func:`_combined`) when its change lies beyond the confirmed sources' threshold whatever the unmeasurable
    sources did within their noise: the product of every source's band (:func:`_band`). A 2x slower P=2
    all-reduce (confirmed) over a P=1 one whose processes vary 22% (unmeasurable at 5%) is an efficiency at
    P=2 of about half, well beyond any 5% line whichever way P=1 wandered; a P=1 varying 2x could hide it,
    and then the row stays unmeasurable (None here). Gaps other than unmeasurable (invalid, new, missing)
    always pass to the row."""
    confirmed = [s for s, _ in sources if s.verdict in _CONFIRMED]
    if not confirmed or c.head is None or any(
            s.verdict.is_gap and s.verdict is not Verdict.UNMEASURABLE for s, _ in sources):
        return None
    lo = hi = own = 1.0
    parts = []
    for s, power in sources:
        band, r = _band(s), _ratio(s.judgement)
        if band is None or r is None:
            return None
        a, b, how = band
        if a <= 0:
            return None
        a, b = sorted((a ** power, b ** power))
        lo, hi, own = lo * a, hi * b, own * r ** power
        parts.append(f"{s.case} {s.verdict.label} {how}")
    threshold = max((s.judgement.threshold_pct or 0.0 for s in confirmed), default=0.0) or 2.0
    line = 1.0 + threshold / 100.0
    if _within_line(threshold) is None or not (lo >= line or hi <= 1.0 / line) or not math.isfinite(own) or own <= 0:
        return None
    worse = (own > 1.0) == c.lower_is_better
    verdicts = {s.verdict for s in confirmed}
    verdict = (Verdict.SEVERE if Verdict.SEVERE in verdicts else Verdict.REGRESSION) if worse else Verdict.IMPROVED
    value = c.head.median
    ci = ((lo - 1.0) * 100.0, (hi - 1.0) * 100.0)
    figures = Figures(reference=value / own, reference_label=f"its sources' references ({names})", value=value,
                      value_label=f"tonight, {c.head.n} sample{'s' if c.head.n != 1 else ''}",
                      lower_is_better=c.lower_is_better, unit=c.unit, ci_pct=ci, threshold_pct=threshold,
                      follows=names)
    note = (f"follows its sources: {'; '.join(parts)}: {own * 100 - 100:+.2f}%, within [{ci[0]:+.2f}%, "
            f"{ci[1]:+.2f}%] whatever the unmeasurable sources did within their noise, beyond the "
            f"{threshold:.2f}% line")
    return Judgement(verdict, None, None, threshold, note, figures=figures)


def follow_sources(rows: Sequence[Comparison]) -> list[Comparison]:
    """``rows`` with every derived row following its source's verdict: a metric the registry derives
    (:func:`zlops.metrics.derived_from`) from the row of the same pool and case, and a campaign's
    efficiency or stack ratio (:func:`campaign_sources`) from its cases' timings.

    A derived row whose sources are not all there tonight (or that has no value tonight) keeps its own
    judgement. See the module docstring.
    """
    by_key = {(c.pool, c.case, c.metric): c for c in rows}
    out: list[Comparison] = []
    for c in rows:
        if c.head is None:
            out.append(c)
            continue
        rule = metrics.derived_from(c.metric)
        src = None if rule is None else by_key.get((c.pool, c.case, rule.source))
        if rule is not None and src is not None and src.head is not None:
            out.append(replace(c, judgement=_followed(c, src, rule)))
            continue
        sources = campaign_sources(c, by_key) if rule is None else None
        combined = None if sources is None or any(s.head is None for s, _ in sources) else _combined(c, sources)
        out.append(c if combined is None else replace(c, judgement=combined))
    return out
