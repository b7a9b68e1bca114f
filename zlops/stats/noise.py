"""Noise model of one series: how far apart two measurements of unchanged code land.

A series (suite, pool, case, metric) has two kinds of noise:

- **between nights**: each night is a fresh process (often a fresh boot of the device's clocks,
  caches, allocator and autotuner), so its median moves even when the code did not. Measured on a
  real H200 this is 0.1-0.5% for large kernels and 4-10% for tiny ones (``tests/data/noise/``).
- **in the run**: the spread of tonight's own samples (rounds of the harness). It bounds how well
  tonight's median is known, but says nothing about process-to-process drift, so it is only a lower
  bound on the noise of a night-to-night comparison.

The between-night spread is the larger of two robust estimates over the last accepted nights,
both on log values (relative and symmetric: 2x slower and 2x faster are equally far):

- **level**: the spread of the nights around their median, ``sigma(log x - median(log x))``;
  it sees a series that sits in one performance mode for a while and then in another (real H200
  ``softmax_small`` graph_ms: four nights at +2..+3%, then five near -0.5%, then +2.5% and +4.7%).
- **successive**: the spread of consecutive log-ratios divided by sqrt(2) (the difference of two
  nights carries the noise of both), ``sigma(diff(log x) - median(diff)) / sqrt(2)``; it sees a
  series that hops between modes from one process to the next (real ``softmax_small`` do_bench:
  near -0.7% or at +4..+8.5%, 9 nights to 7, often alternating) and, unlike the level, is not
  inflated by a past step in the window (one large difference) or a creep (a shifted median
  difference): von Neumann's successive-difference idea (von Neumann, Kent, Bellinson & Hart 1941).

``sigma(d)`` is a quantile-based normal scale: ``Q_q(|d|) / Phi^-1((1 + q) / 2)``. With q = 0.5
it is the MAD scaled by 1.4826 (Hampel 1974), which has a 50% breakdown point: it ignores up to
half of the values, so it also ignores a performance mode that 20-45% of the processes land in, and
that mode is exactly what makes a naive threshold cry wolf (measured: ``benchmarks/noise_replay.py``
with ``--quantile 0.5``). The default q = 0.8 (``Policy.noise_quantile``) still ignores up to 20%
of the values (a single spike in a window of ten nights) but sees any mode more common than that.
For normal noise every q gives the same sigma. References: Hampel (1974), JASA 69(346); Rousseeuw &
Croux (1993), "Alternatives to the median absolute deviation", JASA 88(424), on quantile-based
scale estimators and their breakdown.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

#: Standard error of the median of n normal samples is sqrt(pi/2) * sigma / sqrt(n).
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2.0)


def _positive_array(values: Sequence[float], name: str) -> np.ndarray:
    arr = np.array(values, dtype=float)  # a copy: the caller's sequence is never touched
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a flat sequence of numbers, got shape {arr.shape}")
    if arr.size and (not np.all(np.isfinite(arr)) or np.any(arr <= 0)):
        raise ValueError(f"{name}: expected finite positive values, got {values!r}")
    return arr


def robust_sigma(deviations: Sequence[float], *, quantile: float = 0.5) -> float:
    """Normal-equivalent scale of ``deviations``: Q_q(|d|) / Phi^-1((1 + q) / 2).

    q = 0.5 is 1.4826 * MAD (for deviations from the median); larger q trades robustness (breakdown
    point 1 - q) for seeing minority modes. See the module docstring.
    """
    if not 0 < quantile < 1:
        raise ValueError(f"quantile: expected 0 < q < 1, got {quantile}")
    d = np.abs(np.array(deviations, dtype=float))
    if d.size == 0:
        raise ValueError("deviations: expected at least one value")
    return float(np.quantile(d, quantile)) / float(ndtri((1.0 + quantile) / 2.0))


def robust_relative_spread(values: Sequence[float], *, quantile: float = 0.5) -> float | None:
    """Spread of single values around their median in percent, on logs (None for fewer than 2).

    With the default q = 0.5 this is 1.4826 * MAD of log values, ~ 1.4826 * MAD / median.
    """
    arr = _positive_array(values, "values")
    if arr.size < 2:
        return None
    logs = np.log(arr)
    return robust_sigma((logs - np.median(logs)).tolist(), quantile=quantile) * 100.0


def successive_log_spread(values: Sequence[float], *, quantile: float = 0.5) -> float | None:
    """Per-value sigma in percent from successive log-ratios: sigma(diff(log x) - median) / sqrt(2).

    None for fewer than 3 values (fewer than two differences have no spread worth the name).
    """
    arr = _positive_array(values, "values")
    if arr.size < 3:
        return None
    d = np.diff(np.log(arr))
    return robust_sigma((d - np.median(d)).tolist(), quantile=quantile) / math.sqrt(2.0) * 100.0


@dataclass(frozen=True)
class NoiseModel:
    """The noise of one series, all spreads in percent of the value (normal-sigma units).

    ``level_pct`` and ``successive_pct``: the two between-night estimates of the module docstring
    over the last ``n_nights`` accepted nights; ``between_pct``: the larger of them (None with fewer
    than 3 nights); ``in_run_pct``: the spread (1.4826 * MAD) of one of tonight's samples and
    ``in_run_n`` their count; ``enough_history``: ``n_nights >= min_nights``, i.e. ``between_pct``
    may be trusted; ``quantile``: the q of the between-night estimators.
    """

    level_pct: float | None
    successive_pct: float | None
    in_run_pct: float | None
    in_run_n: int
    n_nights: int
    enough_history: bool
    quantile: float = 0.8
    #: spread of single A/B runs (processes) of this series around their median, None for fewer than 3
    process_pct: float | None = None
    #: how many A/B runs (each a process at the series' current level) the model saw
    n_processes: int = 0

    def __post_init__(self) -> None:
        for name in ("level_pct", "successive_pct", "in_run_pct", "process_pct"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise ValueError(f"NoiseModel.{name}: expected a finite number >= 0 or None, got {v!r}")
        if self.in_run_n < 0 or self.n_nights < 0 or self.n_processes < 0:
            raise ValueError(f"NoiseModel: counts must be >= 0, got in_run_n={self.in_run_n}, "
                             f"n_nights={self.n_nights}, n_processes={self.n_processes}")

    @property
    def between_pct(self) -> float | None:
        """Night-to-night sigma: max(level, successive); None until both exist (3 nights)."""
        if self.level_pct is None or self.successive_pct is None:
            return None
        return max(self.level_pct, self.successive_pct)

    @property
    def in_run_se_pct(self) -> float | None:
        """Standard error of tonight's median from the in-run spread (sqrt(pi/2)*s/sqrt(n))."""
        if self.in_run_pct is None or self.in_run_n < 2:
            return None
        return MEDIAN_SE_FACTOR * self.in_run_pct / math.sqrt(self.in_run_n)

    @property
    def sigma_pct(self) -> float:
        """The noise a night-to-night comparison of this series is judged against.

        With enough history: max(between-night sigma, in-run standard error of tonight's median).
        The between-night figure already contains the in-run noise of past nights; the max only
        matters when tonight's run is unusually noisy. Without enough history only the in-run
        standard error is known (0.0 if there are no in-run samples either), which understates
        process-to-process drift: callers must treat such a model as provisional. The spread of
        the nights seen so far (3 or more) and of A/B runs (each a process) only ever raises it:
        on FlagGems (H200) the in-run spread is ~0.1% while processes land up to 2x apart.
        """
        parts = [self.in_run_se_pct or 0.0, self.process_pct or 0.0]
        if self.between_pct is not None:  # 3+ nights: already evidence of process-to-process drift
            parts.append(self.between_pct)
        return max(parts)


def noise_model(history_medians: Sequence[float], in_run_samples: Sequence[float] | None = None, *,
                min_nights: int, window: int | None = None, quantile: float = 0.8,
                processes: Sequence[float] | None = None) -> NoiseModel:
    """Noise model of a series from its accepted nightly medians (oldest first) and tonight's samples.

    Uses the last ``window`` nights (all when None); ``enough_history`` needs at least
    ``min_nights`` of them (and never fewer than 3, the least that gives two successive
    differences). ``quantile`` is the q of the between-night scale estimators (0.5 = MAD); the
    in-run spread is always the MAD. Inputs are copied, never modified. Method: module docstring.
    """
    if min_nights < 3:
        raise ValueError(f"min_nights: expected >= 3 (two successive differences), got {min_nights}")
    if window is not None and window < min_nights:
        raise ValueError(f"window: expected >= min_nights ({min_nights}), got {window}")
    hist = _positive_array(history_medians, "history_medians")
    if window is not None:
        hist = hist[-window:]
    runs = _positive_array(in_run_samples if in_run_samples is not None else (), "in_run_samples")
    procs = _positive_array(processes if processes is not None else (), "processes")
    nights = hist.tolist()
    return NoiseModel(
        level_pct=robust_relative_spread(nights, quantile=quantile) if hist.size >= 3 else None,
        successive_pct=successive_log_spread(nights, quantile=quantile),
        in_run_pct=robust_relative_spread(runs.tolist()),
        in_run_n=int(runs.size),
        n_nights=int(hist.size),
        enough_history=bool(hist.size >= min_nights),
        quantile=quantile,
        process_pct=robust_relative_spread(procs.tolist(), quantile=quantile) if procs.size >= 3 else None,
        n_processes=int(procs.size),
    )


def ratio_threshold_pct(sigma_pct: float, *, floor_pct: float, k: float) -> float:
    """max(floor_pct, k sigma) as a ratio in percent: ``max(floor_pct, (exp(k * sigma / 100) - 1) * 100)``.

    The noise is a spread of log values (``sigma_pct`` is 100 x a log sigma), so k sigma is a log
    ratio; the threshold is that ratio written as the percent by which the worse side exceeds the
    better one. For small noise the two agree (k sigma = 3% is a 3.05% threshold); for large noise
    only the ratio is right: 25% noise at k = 3 is a factor of 2.12 either way (+112% of a time, a
    fall to 47% of a throughput), where a plain 75% could never be passed by a fall.
    """
    if floor_pct <= 0 or k <= 0:
        raise ValueError(f"floor_pct and k must be > 0, got floor_pct={floor_pct}, k={k}")
    return max(floor_pct, math.expm1(k * sigma_pct / 100.0) * 100.0)


def log_ratio(pct: float) -> float:
    """The log ratio (natural, not x 100) of a percent threshold: ``log(1 + pct / 100)``."""
    return math.log1p(pct / 100.0)


def effective_threshold(noise: NoiseModel, *, floor_pct: float, k: float) -> float:
    """The percent change a series must exceed to be suspect: max(floor_pct, k x noise.sigma_pct) on the
    log scale (:func:`ratio_threshold_pct`), compared with the log ratio of tonight to the reference.

    The configured floor keeps the 2% promise on quiet series; k times the measured noise keeps
    noisy ones from crying wolf (minimum-detectable-effect thresholds, prior-art O3; conbench's
    lookback z-score is the same idea with k = z and no floor).
    """
    return ratio_threshold_pct(noise.sigma_pct, floor_pct=floor_pct, k=k)


def is_measurable(noise: NoiseModel, *, target_pct: float = 5.0, k: float) -> bool:
    """Whether a ``target_pct`` change can be told from this series' noise: k x sigma <= log(1 + target).

    Both sides are log ratios (the noise is estimated on logs). A series that fails is *unmeasurable
    at target*: reported as a coverage gap, never flagged (prior-art O3). Only meaningful when
    ``noise.enough_history``; a provisional model (no history) is judged on its in-run noise alone.
    """
    if target_pct <= 0 or k <= 0:
        raise ValueError(f"target_pct and k must be > 0, got target_pct={target_pct}, k={k}")
    return k * noise.sigma_pct / 100.0 <= log_ratio(target_pct)


@dataclass(frozen=True)
class Modes:
    """Separated performance levels of one series' processes (a multi-modal series).

    ``levels``: the median of each level, ascending; ``shares``: the share of the values in each;
    ``gap_pct``: how far apart neighbouring levels are (upper/lower - 1, in %); ``within_pct``: the
    spread inside the levels (sigma, % of the value): the noise of a comparison within one level.
    """

    levels: tuple[float, ...]
    shares: tuple[float, ...]
    gap_pct: float
    within_pct: float
    n: int

    def describe(self, unit: str = "") -> str:
        """``bimodal 0.043/0.094 ms``."""
        kind = {2: "bimodal", 3: "trimodal"}.get(len(self.levels), f"{len(self.levels)}-modal")
        levels = "/".join(f"{v:.4g}" for v in self.levels)
        return f"{kind} {levels}{' ' + unit if unit else ''}"

    def span_contains(self, value: float, margin_pct: float) -> bool:
        """Whether ``value`` lies within the span of the levels widened by the ratio ``1 + margin_pct / 100``
        on each side (a ratio both ways: a margin of 100% reaches half the lowest level, never below 0)."""
        widen = 1.0 + margin_pct / 100.0
        return self.levels[0] / widen <= value <= self.levels[-1] * widen

    def nearest(self, value: float) -> float:
        return min(self.levels, key=lambda lv: abs(math.log(value / lv)))


def detect_modes(values: Sequence[float], *, floor_pct: float, k: float = 3.0, min_share: float = 0.2,
                 ordered: bool = True, max_levels: int = 3) -> Modes | None:
    """Levels that a series' processes settle on, when they are clearly separated; None otherwise.

    ``values`` are process-level figures (one per night's process, or per A/B run), in time order
    when ``ordered``. Method: split the sorted log values at their largest gaps (at most
    ``max_levels`` levels) and keep a split only when the gap exceeds both ``2 x floor_pct`` and
    ``k`` times the spread inside the levels (so a 2x jump of a tight kernel is a level, a wide
    unimodal spread is not), and each level holds at least ``min_share`` of the values and at least
    two of them (a single value is a spike, not a level). In time order the levels must also
    alternate (at least two switches between them): a single switch is a step (a change of the code
    or the machine), not a mode, and is left
    to the judge. Real case: FlagGems' small shapes on an H200 jump ~2x between processes while each
    process is tight (tests/data/flaggems_h200/, benchmarks/flaggems_h200_stats.py).
    """
    arr = _positive_array(values, "values")
    if arr.size < 3:
        return None
    logs = np.log(arr)
    order = np.argsort(logs, kind="stable")
    s = logs[order]
    gaps = np.diff(s)
    # every level holds at least two values (one value is a spike, not a level) and min_share of them
    need = max(2, math.ceil(min_share * arr.size))
    best: Modes | None = None
    for n_levels in range(2, max_levels + 1):
        cut_idx = np.sort(np.argsort(gaps)[::-1][: n_levels - 1])
        bounds = [0, *(int(i) + 1 for i in cut_idx), int(s.size)]
        groups = [s[a:b] for a, b in itertools.pairwise(bounds)]
        if any(g.size < need for g in groups):
            break
        within = [g - np.median(g) for g in groups if g.size]
        dev = np.concatenate(within)
        within_sigma = robust_sigma(dev.tolist(), quantile=0.8) if dev.size >= 2 else 0.0
        min_gap = min(float(gaps[i]) for i in cut_idx)
        gap_pct = (math.exp(min_gap) - 1.0) * 100.0
        if gap_pct <= 2.0 * floor_pct or min_gap <= k * max(within_sigma, 1e-12):
            continue  # not separated at this many levels; more levels may separate them
        labels = np.empty(s.size, dtype=int)
        for lvl, (a, b) in enumerate(itertools.pairwise(bounds)):
            labels[a:b] = lvl
        if ordered:
            in_time = np.empty(s.size, dtype=int)
            in_time[order] = labels
            if int(np.count_nonzero(np.diff(in_time))) < 2:
                continue
        best = Modes(levels=tuple(float(np.exp(np.median(g))) for g in groups),
                     shares=tuple(g.size / s.size for g in groups), gap_pct=gap_pct,
                     within_pct=within_sigma * 100.0, n=int(s.size))
    return best


#: the fewest A/B runs (over all sides) an A/B noise estimate rests on
AB_NOISE_MIN_RUNS = 6


def ab_noise_pct(sides: Collection[Collection[float]]) -> float | None:
    """The run-to-run noise of interleaved A/B runs, in % (sigma on the log scale): each side's runs (one commit,
    fresh processes minutes apart) about their own median, pooled over ``sides``, as a root mean square over the
    degrees of freedom the side medians left (``n - sides``). Deliberately not robust: a run on another process
    level is exactly the noise an A/B of the series must see through (a median absolute deviation reads 0 on
    sides of 1.0/2.0/1.0 runs). None under :data:`AB_NOISE_MIN_RUNS` runs of sides of two or more."""
    devs: list[float] = []
    used = 0
    for side in sides:
        values = [float(v) for v in side if v > 0]
        if len(values) < 2:
            continue
        logs = np.log(values)
        devs += (logs - float(np.median(logs))).tolist()
        used += 1
    if len(devs) < AB_NOISE_MIN_RUNS or len(devs) <= used:
        return None
    rms = math.sqrt(float(np.sum(np.square(devs))) / (len(devs) - used))
    return math.expm1(rms) * 100.0
