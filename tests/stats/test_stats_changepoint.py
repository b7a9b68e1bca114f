"""E-divisive change points (Otava/Hunter t-test variant) and the first bad night of a creep."""

from __future__ import annotations

import numpy as np
import pytest

from zlops.stats import change_points, detect_change_points, first_bad_night


def _noisy(levels: np.ndarray, sigma_pct: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return (levels * (1 + sigma_pct / 100 * rng.standard_normal(levels.size))).tolist()


def test_a_single_step_is_found_at_its_night() -> None:
    x = _noisy(np.r_[np.full(30, 1.0), np.full(20, 1.05)], 0.5, seed=1)
    [cp] = detect_change_points(x)
    assert cp.index == 30 and cp.change_pct == pytest.approx(5.0, abs=0.5) and cp.pvalue < 0.001


def test_several_steps_in_a_long_history_across_windows() -> None:
    levels = np.r_[np.full(120, 1.0), np.full(30, 1.03), np.full(50, 0.98)]
    assert change_points(_noisy(levels, 0.5, seed=2)) == [120, 150]


@pytest.mark.parametrize("seed", range(5))
def test_pure_noise_has_no_change_points(seed: int) -> None:
    assert change_points(_noisy(np.ones(60), 1.0, seed=seed)) == []


def test_a_single_spike_is_not_a_change_point() -> None:
    levels = np.ones(40)
    levels[25] = 1.3
    assert change_points(_noisy(levels, 0.3, seed=3), min_size=3) == []


def test_min_magnitude_drops_small_significant_steps() -> None:
    x = _noisy(np.r_[np.full(30, 1.0), np.full(30, 1.01)], 0.1, seed=4)
    assert change_points(x) == [30]
    assert change_points(x, min_magnitude_pct=2.0) == []


def test_real_quiet_a_a_series_have_no_change_points(quiet_series: dict[str, list[float]]) -> None:
    for key, values in quiet_series.items():
        assert change_points(values) == [], key


def test_first_bad_night_of_a_step_and_of_a_slow_creep() -> None:
    step = _noisy(np.r_[np.full(20, 1.0), np.full(15, 1.06)], 0.3, seed=5)
    assert first_bad_night(step, 2.0) == 20
    # 15 flat nights, then +0.4% a night: the creep crosses +2% at index 19/20
    creep = _noisy(np.r_[np.ones(15), 1 + 0.004 * np.arange(1, 26)], 0.2, seed=6)
    night = first_bad_night(creep, 2.0)
    assert night is not None and 16 <= night <= 23
    assert first_bad_night(creep, 50.0) is None          # it never became that bad


def test_first_bad_night_direction_and_improvements() -> None:
    faster = _noisy(np.r_[np.full(20, 1.0), np.full(15, 0.9)], 0.3, seed=7)
    assert first_bad_night(faster, 2.0) is None                         # lower is better: an improvement
    assert first_bad_night(faster, 2.0, lower_is_better=False) == 20    # a throughput drop


def test_change_points_do_not_modify_the_series_and_validate_arguments() -> None:
    x = np.array(_noisy(np.r_[np.full(10, 1.0), np.full(10, 1.1)], 0.3, seed=8))
    saved = x.copy()
    change_points(x)  # type: ignore[arg-type]
    first_bad_night(x, 2.0)  # type: ignore[arg-type]
    assert np.array_equal(x, saved)
    assert change_points([1.0, 2.0]) == []
    with pytest.raises(ValueError, match="min_size"):
        change_points([1.0] * 10, min_size=0)
    with pytest.raises(ValueError, match="series"):
        change_points([1.0, float("nan")] * 5)


def test_pooled_t_p_is_scipys_ttest_ind_from_stats_bit_for_bit() -> None:
    """The change-point search's t-test p without importing scipy.stats: the very same float."""
    import numpy as np
    from scipy import stats

    from zlops.stats.changepoint import pooled_t_p

    rng = np.random.default_rng(2)
    checked = 0
    for _ in range(3000):
        n1, n2 = int(rng.integers(1, 60)), int(rng.integers(1, 60))
        m1 = rng.lognormal(0, 1)
        m2 = m1 * (1 + rng.normal(0, 0.05))
        s1, s2 = rng.lognormal(-3, 1, 2) * (rng.random(2) > 0.05)
        if n1 + n2 <= 2 or (s1 == 0 and s2 == 0):
            continue
        want = float(stats.ttest_ind_from_stats(m1, s1, n1, m2, s2, n2).pvalue)
        got = pooled_t_p(m1, s1, n1, m2, s2, n2)
        assert got == want or (np.isnan(got) and np.isnan(want)), (m1, s1, n1, m2, s2, n2)
        checked += 1
    assert checked > 2500
