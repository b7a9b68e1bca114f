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
  and opens no alert (:mod:`zlops.alerts`): its source does;
- a row whose source series is absent tonight (no such metric for the case, or nothing measured) keeps
  its own verdict.

A reference implementation's own timing (FlagGems ``latency_base``) is not derived: it keeps its own verdict.
Pure: rows in, new rows out; applying it twice gives the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from zlops import metrics
from zlops.model import Comparison, Figures, Judgement

__all__ = ["follow_sources", "follows_source"]


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


def _followed(c: Comparison, src: Comparison, rule: metrics.Derived) -> Judgement:
    s = src.judgement
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


def follow_sources(rows: Sequence[Comparison]) -> list[Comparison]:
    """``rows`` with every derived row (:func:`zlops.metrics.derived_from`) following its source's verdict.

    The source is the row of the same pool and case whose metric the registry names; a derived row
    without one tonight (or without a value tonight) keeps its own judgement. See the module docstring.
    """
    by_key = {(c.pool, c.case, c.metric): c for c in rows}
    out: list[Comparison] = []
    for c in rows:
        rule = metrics.derived_from(c.metric)
        src = None if rule is None else by_key.get((c.pool, c.case, rule.source))
        if rule is None or src is None or src.head is None or c.head is None:
            out.append(c)
            continue
        out.append(replace(c, judgement=_followed(c, src, rule)))
    return out
