"""Noise model: estimators on synthetic series with known sigma, steps and modes, and on real H200 noise."""

from __future__ import annotations

import numpy as np
import pytest

from zlops.stats import (
    NoiseModel,
    effective_threshold,
    is_measurable,
    noise_model,
    robust_relative_spread,
    successive_log_spread,
)
from zlops.stats.noise import robust_sigma


def _normal(sigma_pct: float, n: int, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return (100.0 * (1.0 + sigma_pct / 100.0 * rng.standard_normal(n))).tolist()


@pytest.mark.parametrize("quantile", [0.5, 0.8])
def test_estimators_recover_a_known_sigma(quantile: float) -> None:
    x = _normal(1.0, 2000)
    assert robust_relative_spread(x, quantile=quantile) == pytest.approx(1.0, rel=0.1)
    assert successive_log_spread(x, quantile=quantile) == pytest.approx(1.0, rel=0.1)


def test_robust_sigma_at_the_median_is_the_scaled_mad() -> None:
    d = [-3.0, -1.0, 0.0, 1.0, 2.0]
    assert robust_sigma(d, quantile=0.5) == pytest.approx(1.4826 * 1.0, rel=1e-4)
    with pytest.raises(ValueError, match="quantile"):
        robust_sigma(d, quantile=1.0)


def test_a_past_step_inflates_the_level_but_not_the_successive_spread() -> None:
    x = np.r_[_normal(0.3, 15, seed=1), np.array(_normal(0.3, 15, seed=2)) * 1.06].tolist()
    m = noise_model(x, min_nights=6)
    assert m.successive_pct is not None and m.successive_pct < 0.6
    assert m.level_pct is not None and m.level_pct > 2.0
    assert m.between_pct == max(m.level_pct, m.successive_pct)


def test_mode_hopping_is_seen_at_q08_but_hidden_by_the_mad() -> None:
    rng = np.random.default_rng(3)
    fast = rng.random(30) < 0.65                        # 35% of the processes land in a +8% mode
    x = np.where(fast, 1.0, 1.08) * (1 + 0.002 * rng.standard_normal(30))
    mad = noise_model(x.tolist(), min_nights=6, quantile=0.5)
    q08 = noise_model(x.tolist(), min_nights=6, quantile=0.8)
    assert mad.level_pct is not None and mad.level_pct < 1.0
    assert q08.sigma_pct > 3.0
    assert not is_measurable(q08, target_pct=5.0, k=3.0)


def test_history_window_and_enough_history() -> None:
    x = _normal(0.5, 40)
    m = noise_model(x, [1.0, 1.01, 0.99], min_nights=6, window=10)
    assert m.n_nights == 10 and m.enough_history and m.in_run_n == 3
    short = noise_model(x[:5], None, min_nights=6)
    # provisional, but the spread of the nights seen so far already counts (it only raises sigma)
    assert not short.enough_history and short.between_pct is not None and short.sigma_pct == short.between_pct
    assert noise_model(x[:2], None, min_nights=6).sigma_pct == 0.0
    assert noise_model(x[:2], None, min_nights=3).between_pct is None


def test_in_run_noise_enters_as_the_standard_error_of_the_median() -> None:
    runs = _normal(4.0, 100, seed=5)
    m = noise_model([100.0] * 8, runs, min_nights=6)
    assert m.in_run_pct == pytest.approx(4.0, rel=0.2)
    assert m.in_run_se_pct == pytest.approx(1.2533 * m.in_run_pct / 10.0, rel=1e-3)
    assert m.sigma_pct == pytest.approx(m.in_run_se_pct)  # the history is perfectly flat


def test_inputs_are_never_modified() -> None:
    hist = _normal(1.0, 12)
    arr = np.array(hist)
    runs = [3.0, 1.0, 2.0]
    before = (list(hist), arr.copy(), list(runs))
    noise_model(hist, runs, min_nights=6)
    noise_model(arr, runs, min_nights=6)  # type: ignore[arg-type]
    assert hist == before[0] and np.array_equal(arr, before[1]) and runs == before[2]


@pytest.mark.parametrize("bad", [[1.0, -2.0, 3.0], [1.0, float("nan"), 2.0], [1.0, 0.0, 2.0]])
def test_non_positive_or_non_finite_history_is_refused(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="history_medians"):
        noise_model(bad, min_nights=3)


def test_effective_threshold_and_measurability() -> None:
    quiet = NoiseModel(0.3, 0.2, None, 0, 10, True)
    noisy = NoiseModel(1.5, 1.0, None, 0, 10, True)
    assert effective_threshold(quiet, floor_pct=2.0, k=3.0) == 2.0
    # the noise is a log sigma: k sigma = 4.5% of log is a ratio of exp(0.045) = +4.60%
    assert effective_threshold(noisy, floor_pct=2.0, k=3.0) == pytest.approx(4.6028, abs=1e-4)
    assert is_measurable(noisy, target_pct=5.0, k=3.0)
    assert not is_measurable(noisy, target_pct=5.0, k=4.0)
    with pytest.raises(ValueError):
        effective_threshold(quiet, floor_pct=0.0, k=3.0)
    with pytest.raises(ValueError, match="level_pct"):
        NoiseModel(-1.0, 0.1, None, 0, 3, True)


def test_thresholds_and_measurability_are_ratios_on_the_log_scale() -> None:
    """Issue 22: 25% process noise at k = 3 is a factor exp(0.75) = 2.12 either way; in plain percent the
    threshold (75%) could never be passed by a fall, which cannot go below -100%."""
    from zlops.stats.noise import Modes, ratio_threshold_pct

    loud = NoiseModel(25.0, 25.0, None, 0, 30, True)
    assert effective_threshold(loud, floor_pct=2.0, k=3.0) == pytest.approx(111.70, abs=0.01)
    assert ratio_threshold_pct(0.5, floor_pct=2.0, k=3.0) == 2.0
    # measurable at 5% means k sigma <= log(1.05) = 4.879%: sigma 1.64% is just over the line
    assert is_measurable(NoiseModel(1.62, 1.0, None, 0, 10, True), target_pct=5.0, k=3.0)
    assert not is_measurable(NoiseModel(1.64, 1.0, None, 0, 10, True), target_pct=5.0, k=3.0)
    # the span of process levels widened by a ratio: a 150% margin never reaches down to zero
    modes = Modes(levels=(1.0, 2.0), shares=(0.5, 0.5), gap_pct=100.0, within_pct=1.0, n=10)
    assert modes.span_contains(0.5, 150.0) and not modes.span_contains(0.3, 150.0)
    assert modes.span_contains(4.9, 150.0) and not modes.span_contains(5.1, 150.0)


def test_real_h200_noise_large_kernels_quiet_tiny_kernels_unmeasurable(real_noise: dict[str, list[float]]) -> None:
    def model(key: str) -> NoiseModel:
        return noise_model(real_noise[key], min_nights=6)

    for key in ("softmax_8192/do_bench_ms", "sort_16M/graph_ms", "gelu_8192/do_bench_ms"):
        assert model(key).sigma_pct < 0.5, key
        assert effective_threshold(model(key), floor_pct=2.0, k=3.0) == 2.0
    for key in ("softmax_small/do_bench_ms", "mm_512/do_bench_ms"):   # 4-10% process-to-process drift
        assert not is_measurable(model(key), target_pct=5.0, k=3.0), key
    # the bimodal tiny softmax: the level MAD sees only its larger mode, successive differences see both
    mad = noise_model(real_noise["softmax_small/do_bench_ms"], min_nights=6, quantile=0.5)
    assert mad.level_pct is not None and mad.successive_pct is not None
    assert mad.level_pct < 1.5 < 3.5 < mad.successive_pct
