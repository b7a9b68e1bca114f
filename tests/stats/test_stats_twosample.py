"""Two-sample tests: MWU / KS against scipy, and the seeded bootstrap CI of the median ratio."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from zlops.stats import bootstrap_median_ratio_ci, ks, mann_whitney, min_mwu_pvalue


def _sample(n: int, shift: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return (1.0 + shift + 0.01 * rng.standard_normal(n)).tolist()


def test_mann_whitney_is_scipys_two_sided_test() -> None:
    a, b = _sample(12, 0.0, 1), _sample(12, 0.02, 2)
    assert mann_whitney(a, b) == pytest.approx(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    assert mann_whitney(a, b) < 0.002
    assert mann_whitney(a, _sample(12, 0.0, 3)) > 0.05
    assert mann_whitney([1.0, 1.0], [1.0, 1.0, 1.0]) == 1.0


def test_ks_sees_a_change_of_spread_that_mwu_misses() -> None:
    rng = np.random.default_rng(4)
    narrow = (1.0 + 0.001 * rng.standard_normal(60)).tolist()
    wide = (1.0 + 0.05 * rng.standard_normal(60)).tolist()
    assert ks(narrow, wide) < 0.01 < mann_whitney(narrow, wide)


def test_min_mwu_pvalue_decides_whether_alpha_is_reachable() -> None:
    assert min_mwu_pvalue(4, 4) == pytest.approx(2 / 70)
    assert min_mwu_pvalue(8, 8) == pytest.approx(2 / 12870)
    assert min_mwu_pvalue(0, 5) == 1.0


def test_bootstrap_ci_is_deterministic_per_seed_and_covers_the_true_ratio() -> None:
    base, head = _sample(30, 0.0, 5), _sample(30, 0.05, 6)
    ci = bootstrap_median_ratio_ci(base, head, n_resamples=2000, seed=7)
    assert ci == bootstrap_median_ratio_ci(base, head, n_resamples=2000, seed=7)
    assert ci != bootstrap_median_ratio_ci(base, head, n_resamples=2000, seed=8)
    assert ci[0] < 1.05 < ci[1] and ci[0] > 1.0
    wide = bootstrap_median_ratio_ci(base, head, confidence=0.99, n_resamples=2000, seed=7)
    assert wide[0] <= ci[0] and wide[1] >= ci[1]


def test_bootstrap_does_not_modify_its_inputs_and_validates_them() -> None:
    base, head = np.array(_sample(10, 0.0, 1)), _sample(10, 0.0, 2)
    saved = (base.copy(), list(head))
    bootstrap_median_ratio_ci(base, head, n_resamples=200, seed=0)  # type: ignore[arg-type]
    assert np.array_equal(base, saved[0]) and head == saved[1]
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_median_ratio_ci([1.0], [1.0], confidence=1.0)
    with pytest.raises(ValueError, match="positive"):
        bootstrap_median_ratio_ci([1.0, -1.0], [1.0, 2.0], n_resamples=200)
    with pytest.raises(ValueError, match="head"):
        bootstrap_median_ratio_ci([1.0], [], n_resamples=200)
