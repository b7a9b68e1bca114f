"""Change points of a nightly history: E-divisive with a Student t-test, as Otava (ex-Hunter) does.

The nightly judge compares tonight with recent nights, so a slow creep (0.3% a night) never
crosses any nightly threshold. Looking at the whole history answers a different question: where
does the series change level, and which night did it first become worse than the threshold?

Method (Matteson & James 2014, "A nonparametric approach for multiple change point analysis of
multivariate data", JASA 109(505); Fleming et al. 2023, "Hunter: using change point detection to
hunt for performance regressions", arXiv 2301.03034; apache/otava ``analysis.py``):

1. **Split** (E-divisive, alpha = 1). Within a segment, the candidate split tau maximizes the
   energy-distance statistic Q(tau) = tau*m/n * (2/(tau*m) sum|x_i - y_j| - mean_pairs|x_i - x_k|
   - mean_pairs|y_j - y_k|). Of all current segments the best candidate is tested and kept while
   significant, then the search repeats (MongoDB signal-processing-algorithms' loop). Hunter's
   change: significance is a **two-sided Student t-test** of the two sides (deterministic and
   fast) instead of Matteson & James' permutation test. The first pass uses a weak p (10x the final
   one) on **sliding windows** of ``window_len`` nights, stepping half a window.
2. **Merge**. Repeatedly drop the weakest change point (largest p, recomputed against its
   neighbours) until every one has p < ``max_pvalue`` and a relative change of the segment means
   above ``min_magnitude_pct`` (Otava ``merge``).

``min_size`` is the shortest segment allowed (Otava PR #150): with 2 or more a single spike cannot
become a change point. The t-test uses the sample standard deviation (ddof=1); Otava passes the
population one, which makes it a little more eager on tiny segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np


@dataclass(frozen=True)
class ChangePoint:
    """A level change before night ``index`` (0-based; the first night of the new segment)."""

    index: int
    mean_before: float
    mean_after: float
    pvalue: float

    @property
    def change_pct(self) -> float:
        """(mean_after / mean_before - 1) * 100, raw direction."""
        return (self.mean_after / self.mean_before - 1.0) * 100.0 if self.mean_before else 0.0

    @property
    def magnitude_pct(self) -> float:
        """max(|after/before - 1|, |before/after - 1|) * 100, as Otava's ``change_magnitude``."""
        if self.mean_before == 0 or self.mean_after == 0:
            return 0.0
        return max(abs(self.mean_after / self.mean_before - 1), abs(self.mean_before / self.mean_after - 1)) * 100


def _ttest_p(left: np.ndarray, right: np.ndarray) -> float:
    """Two-sided Student t-test p of two segments (pooled variance: :func:`pooled_t_p`)."""
    if left.size == 0 or right.size == 0 or left.size + right.size <= 2:
        return 1.0
    ml, mr = float(left.mean()), float(right.mean())
    sl = float(left.std(ddof=1)) if left.size >= 2 else 0.0
    sr = float(right.std(ddof=1)) if right.size >= 2 else 0.0
    if sl == 0 and sr == 0:
        return 1.0 if ml == mr else 0.0
    return pooled_t_p(ml, sl, left.size, mr, sr, right.size)


def pooled_t_p(m1: float, s1: float, n1: int, m2: float, s2: float, n2: int) -> float:
    """Two-sided p of Student's t-test from summary statistics (pooled variance): exactly what
    ``scipy.stats.ttest_ind_from_stats`` computes (the same float operations, then
    ``2 * scipy.special.stdtr(df, -|t|)``), without importing scipy.stats (~1-3 s) on a night whose
    only use of it is the change-point search of its flagged series."""
    from scipy.special import stdtr

    v1 = np.float64(0.0) if n1 == 1 else np.asarray(s1, dtype=float) ** 2  # an array's power, as scipy
    v2 = np.float64(0.0) if n2 == 1 else np.asarray(s2, dtype=float) ** 2
    df = n1 + n2 - 2.0
    svar = ((n1 - 1) * v1 + (n2 - 1) * v2) / df
    denom = np.sqrt(svar * (1.0 / n1 + 1.0 / n2))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.divide(np.float64(m1) - np.float64(m2), denom)
    return float(2 * stdtr(np.float64(df), -np.abs(t)))


def _best_split(x: np.ndarray, min_size: int) -> tuple[int, float] | None:
    """argmax over tau of the E-divisive statistic Q(tau) (alpha = 1) with both sides >= min_size."""
    n = x.size
    if n < 2 * min_size:
        return None
    d = np.abs(x[:, None] - x[None, :])
    s = np.zeros((n + 1, n + 1))
    s[1:, 1:] = d.cumsum(0).cumsum(1)  # s[a, b] = sum of d[:a, :b]
    best: tuple[int, float] | None = None
    for tau in range(min_size, n - min_size + 1):
        m = n - tau
        between = s[tau, n] - s[tau, tau]
        within_l = s[tau, tau]                                   # ordered pairs, twice the pair sum
        within_r = s[n, n] - s[tau, n] - s[n, tau] + s[tau, tau]
        e = 2.0 * between / (tau * m)
        if tau > 1:
            e -= within_l / (tau * (tau - 1))
        if m > 1:
            e -= within_r / (m * (m - 1))
        q = tau * m / n * e
        if best is None or q > best[1]:
            best = (tau, q)
    return best


def _edivisive(x: np.ndarray, *, min_size: int, pvalue: float) -> list[int]:
    """Change points of one window: best split over all segments while the t-test says significant."""
    cps: list[int] = []
    while True:
        bounds = [0, *sorted(cps), x.size]
        cand: tuple[float, int, int, int] | None = None
        for start, end in pairwise(bounds):
            found = _best_split(x[start:end], min_size)
            if found is not None and (cand is None or found[1] > cand[0]):
                cand = (found[1], start + found[0], start, end)
        if cand is None:
            return sorted(cps)
        _, idx, start, end = cand
        if _ttest_p(x[start:idx], x[idx:end]) > pvalue:
            return sorted(cps)
        cps.append(idx)


def _stats(x: np.ndarray, cps: Sequence[int]) -> list[ChangePoint]:
    bounds = [0, *cps, x.size]
    out = []
    for i, idx in enumerate(cps):
        left, right = x[bounds[i]:idx], x[idx:bounds[i + 2]]
        out.append(ChangePoint(idx, float(left.mean()), float(right.mean()), _ttest_p(left, right)))
    return out


def detect_change_points(series: Sequence[float], *, min_size: int = 3, max_pvalue: float = 0.001,
                         min_magnitude_pct: float = 0.0, window_len: int = 50) -> list[ChangePoint]:
    """Change points of ``series`` (oldest first) with their segment means and t-test p-values.

    E-divisive split on sliding windows with a first-pass p of 10x ``max_pvalue`` (capped at 0.05
    as in Otava), then the Otava merge pass down to ``max_pvalue`` and ``min_magnitude_pct``.
    Defaults are Otava's (p 0.001, window 50), except ``min_size`` = 3 (Otava PR #150's idea).
    """
    if min_size < 1:
        raise ValueError(f"min_size: expected >= 1, got {min_size}")
    if window_len < 2 * min_size:
        raise ValueError(f"window_len: expected >= 2*min_size ({2 * min_size}), got {window_len}")
    if not 0 < max_pvalue < 1:
        raise ValueError(f"max_pvalue: expected 0 < p < 1, got {max_pvalue}")
    x = np.array(series, dtype=float)
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise ValueError(f"series: expected a flat sequence of finite numbers, got {series!r}")
    if x.size < 2 * min_size:
        return []
    weak_p = max_pvalue * 10 if max_pvalue < 0.005 else min(0.05, max(max_pvalue, max_pvalue * 2))

    found: set[int] = set()
    start, step = 0, max(1, window_len // 2)
    while start < x.size:
        end = min(start + window_len, x.size)
        local = _edivisive(x[start:end], min_size=min_size, pvalue=weak_p)
        found.update(start + i for i in local)
        if end == x.size:
            break
        start = max(start + step, max((start + i for i in local), default=0))

    # windows overlap, so two change points may be closer than min_size: keep the first of such
    cps: list[int] = []
    for idx in sorted(found):
        if idx >= min_size and x.size - idx >= min_size and (not cps or idx - cps[-1] >= min_size):
            cps.append(idx)

    # merge (Otava): drop the weakest until every change point is significant and large enough
    while cps:
        points = _stats(x, cps)
        weakest = max(points, key=lambda c: c.pvalue)
        if weakest.pvalue < max_pvalue:
            weakest = min(points, key=lambda c: c.magnitude_pct)
            if weakest.magnitude_pct > min_magnitude_pct:
                return points
        cps.remove(weakest.index)
    return []


def change_points(series: Sequence[float], *, min_size: int = 3, max_pvalue: float = 0.001,
                  min_magnitude_pct: float = 0.0, window_len: int = 50) -> list[int]:
    """Indices (0-based, first night of each new segment) of the change points of ``series``.

    See :func:`detect_change_points` for the method and its parameters.
    """
    return [c.index for c in detect_change_points(series, min_size=min_size, max_pvalue=max_pvalue,
                                                  min_magnitude_pct=min_magnitude_pct, window_len=window_len)]


def first_bad_night(series: Sequence[float], threshold_pct: float, *, lower_is_better: bool = True,
                    min_size: int = 3, max_pvalue: float = 0.001, window_len: int = 50) -> int | None:
    """The first night (0-based index) whose segment mean is worse than the first segment's by > threshold_pct.

    Segments come from :func:`change_points`. A step regression names its first night. A slow creep
    is cut into several segments and the start of the first one whose *mean* has crossed the
    threshold is named: the night the series settled on a level worse than the threshold, which
    for a creep lies within about half a segment of the night the creep itself crossed. None when
    no segment crossed (including a series without change points).
    """
    if threshold_pct <= 0:
        raise ValueError(f"threshold_pct: expected > 0, got {threshold_pct}")
    x = np.array(series, dtype=float)
    cps = change_points(x.tolist(), min_size=min_size, max_pvalue=max_pvalue, window_len=window_len)
    if not cps:
        return None
    bounds = [0, *cps, x.size]
    base = float(x[: bounds[1]].mean())
    if base == 0:
        return None
    for start, end in pairwise(bounds[1:]):
        change = (float(x[start:end].mean()) / base - 1.0) * 100.0
        worse = change if lower_is_better else -change
        if worse > threshold_pct:
            return start
    return None
