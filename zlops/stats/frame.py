"""The noise judge over many series at once: :func:`judge_tonight` + :func:`decide` vectorized (issue 13).

A suite is tens of thousands of series; judging them one by one costs milliseconds each (numpy's
per-call overhead dominates a 30-value window), i.e. minutes a night. Here every series' window is a
row of one padded matrix and each step of the per-series judge is one numpy operation over all rows:
reference (median of the window), the between-night spreads (level and successive, quantile-based,
:mod:`zlops.stats.noise`), the in-run standard error, threshold, measurability, the screening state,
last night re-judged and held out while it was a suspect, and the two-night confirmation.

The result is exactly the per-series judge's (same states, figures and reasons): rows the fast path
does not cover are handed to the per-series judge instead (``fallback``): series with A/B process
evidence, possible process levels (a gap in the window wider than twice the floor, which
:func:`zlops.stats.noise.detect_modes` needs), no history, too few samples or non-positive values.
``tests/stats/test_stats_frame.py`` checks the agreement on the real H200 A/A nights and on
synthetic series.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri

from zlops.model import change_text
from zlops.stats.decide import (
    UNMEASURABLE_FACTOR,
    Policy,
    State,
    hides_text,
    nights_text,
    pending_text,
    telemetry_problem,
)
from zlops.stats.noise import MEDIAN_SE_FACTOR


@dataclass(frozen=True)
class FrameVerdict:
    """One series' outcome: the decided state, the screening figures and the reason (as :func:`decide`)."""

    state: State
    change_pct: float
    worse_pct: float
    threshold_pct: float
    reference: float
    reference_text: str
    value: float
    noise_pct: float
    reason: str


def _pad(rows: Sequence[Sequence[float]], width: int) -> np.ndarray:
    """Left-padded (NaN) matrix of the last ``width`` values of each row."""
    out = np.full((len(rows), max(width, 1)), np.nan)
    if not width:
        return out
    for i, r in enumerate(rows):  # lists or numpy views (a history frame's slices): no copy per row
        n = min(len(r), width)
        if n:
            out[i, out.shape[1] - n:] = r[len(r) - n:]
    return out


def row_quantile(mat: np.ndarray, q: float) -> np.ndarray:
    """Per row, the ``q`` quantile of its non-NaN values, exactly as ``np.quantile`` (linear) computes it.

    ``np.nanquantile`` loops over rows in Python (``apply_along_axis``): ~0.1 ms a row, seconds for
    a suite. Sorting sends NaNs to the end, so each row's values are its first ``count`` entries.
    """
    srt = np.sort(mat, axis=1)
    counts = np.sum(~np.isnan(mat), axis=1)
    pos = q * (np.maximum(counts, 1) - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, np.maximum(counts - 1, 0))
    t = pos - lo
    rows = np.arange(mat.shape[0])
    a, b = srt[rows, lo], srt[rows, hi]
    diff = b - a
    out = np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)   # numpy's _lerp, both branches
    out = np.where(hi == lo, a, out)
    out[counts == 0] = np.nan
    return out


def row_median(mat: np.ndarray) -> np.ndarray:
    """Per row, ``np.median`` of its non-NaN values (the mean of the two middle values for an even count)."""
    srt = np.sort(mat, axis=1)
    counts = np.sum(~np.isnan(mat), axis=1)
    rows = np.arange(mat.shape[0])
    lo = np.maximum((counts - 1) // 2, 0)
    hi = np.where(counts == 0, 0, counts // 2)
    # np.median takes the mean of the two middle values: the same operation, so the same float
    out = np.where(lo == hi, srt[rows, lo], np.mean(np.stack([srt[rows, lo], srt[rows, hi]]), axis=0))
    out[counts == 0] = np.nan
    return out


def _spread(logs: np.ndarray, q: float, counts: np.ndarray, need: int) -> np.ndarray:
    """Row-wise quantile scale of log deviations from the row median (NaN where fewer than ``need``)."""
    with np.errstate(all="ignore"):
        dev = np.abs(logs - row_median(logs)[:, None])
        out = row_quantile(dev, q) / float(ndtri((1.0 + q) / 2.0)) * 100.0
    out[counts < need] = np.nan
    return out


def _between(window: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
    """(between-night sigma or NaN, count) per row: max(level, successive) as :class:`NoiseModel`."""
    counts = np.sum(~np.isnan(window), axis=1)
    with np.errstate(all="ignore"):
        logs = np.log(window)
    level = _spread(logs, q, counts, 3)
    diffs = np.diff(logs, axis=1) if logs.shape[1] > 1 else np.full((logs.shape[0], 1), np.nan)
    succ = _spread(diffs, q, counts, 3) / math.sqrt(2.0)
    between = np.maximum(level, succ)
    between[np.isnan(level) | np.isnan(succ)] = np.nan
    return between, counts


def _screen(window: np.ndarray, value: np.ndarray, in_run_se: np.ndarray, lower: np.ndarray,
            pol: Policy) -> dict[str, np.ndarray]:
    """:func:`judge_night`'s fast path for every row (no modes, no processes, no telemetry): log ratios."""
    between, counts = _between(window, pol.noise_quantile)
    reference = row_median(window)
    sigma = np.fmax(np.nan_to_num(in_run_se, nan=0.0), np.nan_to_num(between, nan=0.0))
    threshold = np.maximum(pol.potential_pct, np.expm1(pol.k * sigma / 100.0) * 100.0)
    with np.errstate(all="ignore"):
        change = (value / reference - 1.0) * 100.0
        log_worse = np.log(value / reference)
    log_worse = np.where(lower, log_worse, -log_worse)
    worse = np.expm1(log_worse) * 100.0
    measurable = pol.k * sigma / 100.0 <= math.log1p(pol.measurable_target_pct / 100.0)
    line = np.log1p(threshold / 100.0) * np.where(measurable, 1.0, UNMEASURABLE_FACTOR)
    state = np.full(value.shape, State.UNCHANGED.value, dtype=object)
    state[~measurable] = State.UNMEASURABLE.value
    state[log_worse < -line] = State.SUSPECT_IMPROVED.value
    state[log_worse > line] = State.SUSPECT.value
    return {"reference": reference, "sigma": sigma, "threshold": threshold, "change": change, "worse": worse,
            "state": state, "counts": counts, "enough": counts >= pol.min_nights, "measurable": measurable}


def _night_text(s: dict[str, np.ndarray], i: int, pol: Policy) -> tuple[str, str]:
    c = int(s["counts"][i])
    ref_text = f"median of {c} night{'s' if c != 1 else ''}"
    sigma, moved = float(s["sigma"][i]), change_text(float(s["change"][i]), float(s["worse"][i]))
    if s["state"][i] == State.UNMEASURABLE.value:
        return ref_text, hides_text(sigma, pol, float(s["threshold"][i]), moved)
    basis = (f"noise {sigma:.2f}% over {c} nights" if s["enough"][i] else
             f"provisional: {c} nights < {pol.min_nights}, noise {sigma:.2f}%")
    return ref_text, f"{moved} vs {ref_text}; threshold {float(s['threshold'][i]):.2f}% ({basis})"


def _wide(window: np.ndarray, pol: Policy) -> np.ndarray:
    """Rows whose sorted log values hold a gap wider than ``2 x potential_pct`` (possible process levels)."""
    with np.errstate(all="ignore"):
        gaps = np.diff(np.sort(np.log(window), axis=1), axis=1)
    if gaps.shape[1] == 0:
        return np.zeros(window.shape[0], dtype=bool)
    return np.nanmax(np.where(np.isnan(gaps), -np.inf, gaps), axis=1) > math.log1p(2.0 * pol.potential_pct / 100.0)


def _in_run(samples: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(median, n, in-run standard error in %) of tonight's samples per row."""
    n = np.array([len(x) for x in samples], dtype=float)
    mat = _pad(samples, int(n.max()) if n.size else 1)
    with np.errstate(all="ignore"):
        median = row_median(mat)
        logs = np.log(mat)
        dev = np.abs(logs - row_median(logs)[:, None])
        spread = row_quantile(dev, 0.5) / float(ndtri(0.75)) * 100.0
        se = MEDIAN_SE_FACTOR * spread / np.sqrt(n)
    se[n < 2] = np.nan
    return median, n, se


def judge_many(histories: Sequence[Sequence[float]], tonight: Sequence[Sequence[float]],
               lower_is_better: Sequence[bool], *, policy: Policy,
               telemetry: Sequence[Mapping[str, Any] | None] | None = None,
               processes: Sequence[Sequence[float]] | None = None,
               settled: Sequence[bool] | None = None,
               hold: Sequence[str | None] | None = None) -> list[FrameVerdict | None]:
    """Judge every series like ``decide(*judge_tonight(history, tonight, ...))`` (no A/B evidence).

    ``histories[i]``: series i's accepted nightly medians, oldest first (after level changes and
    caliber walls are cut, as for :func:`judge_tonight`); ``tonight[i]``: tonight's raw samples;
    ``settled[i]``: last night's stored verdict says it is no unresolved suspect (``last_settled``);
    ``hold[i]``: why nights alone may not confirm its suspect (``decide``'s ``hold``), or None.
    Returns one :class:`FrameVerdict` per series, or None where the caller must use the per-series
    judge (see the module docstring).
    """
    pol = policy
    size = len(histories)
    if size == 0:
        return []
    hist_n = np.array([len(h) for h in histories])
    full = _pad(histories, pol.window + 1)
    value, n, se = _in_run(tonight)
    lower = np.asarray(lower_is_better, dtype=bool)
    fallback = (hist_n < 2) | (n < pol.min_samples) | ~(value > 0) | np.any(full <= 0, axis=1)
    fallback |= np.array([any(v <= 0 for v in t) for t in tonight])
    if processes is not None:
        fallback |= np.array([len(p) > 0 for p in processes])
    prev = _screen(full[:, :-1], full[:, -1], np.full(size, np.nan), lower, pol)
    if pol.min_samples > 1:   # last night's single value is too few samples: it was invalid, never a suspect
        prev["state"][:] = State.INVALID.value
    if settled is not None:   # settled by its stored verdict: never held out, never last night's suspect
        prev["state"][np.asarray(settled, dtype=bool)] = State.UNCHANGED.value
    held = np.isin(prev["state"], [State.SUSPECT.value, State.SUSPECT_IMPROVED.value])
    # a window whose sorted values hold a gap wider than 2x the floor may have process levels
    # (zlops.stats.noise.detect_modes): those rows take the per-series judge. Last night's window is
    # always full[:, :-1]; tonight's is full[:, 1:], or full[:, :-1] when last night is held out.
    fallback |= _wide(full[:, :-1], pol) | (~held & _wide(full[:, 1:], pol))
    tonight_all = _screen(full[:, 1:], value, se, lower, pol)
    tonight_held = _screen(full[:, :-1], value, se, lower, pol)
    problems = [telemetry_problem(t, max_throttle_share=pol.max_throttle_share, temp_limit_c=pol.temp_limit_c)
                if t else None for t in (telemetry or [None] * size)]

    out: list[FrameVerdict | None] = []
    for i in range(size):
        if fallback[i]:
            out.append(None)
            continue
        s = tonight_held if held[i] else tonight_all
        ref_text, reason = _night_text(s, i, pol)
        state = State(s["state"][i])
        figures = dict(change_pct=float(s["change"][i]), worse_pct=float(s["worse"][i]),
                       threshold_pct=float(s["threshold"][i]), reference=float(s["reference"][i]),
                       reference_text=ref_text, value=float(value[i]), noise_pct=float(s["sigma"][i]))
        if problems[i]:
            out.append(FrameVerdict(State.INVALID, reason=problems[i] or "", **figures))
            continue
        if state in (State.SUSPECT, State.SUSPECT_IMPROVED):
            worse_side = state is State.SUSPECT
            pw, nw, thr = float(prev["worse"][i]), float(s["worse"][i]), float(s["threshold"][i])
            sign = 1.0 if worse_side else -1.0
            second = State(prev["state"][i]) is state
            # no A/B runs on this path: the processes seen are the nights of each model's window
            seen_now, seen_prev = int(s["counts"][i]), int(prev["counts"][i])
            known = seen_now >= pol.min_nights and (not second or seen_prev >= pol.min_nights)
            held_by = hold[i] if hold is not None else None
            if (second and known and held_by is None and sign * math.log1p(pw / 100.0) > math.log1p(thr / 100.0)
                    and sign * math.log1p(nw / 100.0) > math.log1p(thr / 100.0)):
                if worse_side:
                    state = State.SEVERE if min(pw, nw) > pol.regression_pct else State.REGRESSION
                else:
                    state = State.IMPROVED
                nights = nights_text([(float(prev["change"][i]), pw), (float(s["change"][i]), nw)])
                reason = f"two consecutive nights beyond the threshold ({nights}): {reason}"
            else:
                seen = min(seen_now, seen_prev) if second else seen_now
                pending = (held_by if second and held_by
                           else pending_text(second=second, known=known, seen=seen, policy=pol))
                reason = f"{pending}: {reason}"
        out.append(FrameVerdict(state, reason=reason, **figures))
    return out
