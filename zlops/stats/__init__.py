"""Noise-aware statistics of zlops: pure functions, arrays in, new frozen values out (STYLE rule 9).

- :mod:`zlops.stats.noise`: the noise model of a series and its effective threshold.
- :mod:`zlops.stats.twosample`: Mann-Whitney U, Kolmogorov-Smirnov, bootstrap CI of a median ratio,
  Hodges-Lehmann shift with its rank CI.
- :mod:`zlops.stats.decide`: nightly screening, A/B and consecutive-night confirmation, final state.
- :mod:`zlops.stats.changepoint`: E-divisive change points (Otava/Hunter) and the first bad night.

Methods, references, defaults and their measured behaviour on real H200 noise: docs/statistics.md.

May import: nothing of zlops: numpy and scipy only, pure (the layers in docs/design/layers.md;
tests/test_layers.py enforces them).
"""

from __future__ import annotations

from zlops.stats.changepoint import ChangePoint, change_points, detect_change_points, first_bad_night
from zlops.stats.decide import (
    Confirmation,
    Decision,
    NightResult,
    Policy,
    State,
    confirm_ab,
    confirm_consecutive,
    decide,
    interleaved_order,
    judge_night,
    judge_tonight,
    select_for_ab,
    telemetry_problem,
)
from zlops.stats.noise import (
    NoiseModel,
    effective_threshold,
    is_measurable,
    noise_model,
    robust_relative_spread,
    successive_log_spread,
)
from zlops.stats.twosample import bootstrap_median_ratio_ci, hodges_lehmann_ratio_ci, ks, mann_whitney, min_mwu_pvalue

__all__ = [
    "ChangePoint",
    "Confirmation",
    "Decision",
    "NightResult",
    "NoiseModel",
    "Policy",
    "State",
    "bootstrap_median_ratio_ci",
    "change_points",
    "confirm_ab",
    "confirm_consecutive",
    "decide",
    "detect_change_points",
    "effective_threshold",
    "first_bad_night",
    "hodges_lehmann_ratio_ci",
    "interleaved_order",
    "is_measurable",
    "judge_night",
    "judge_tonight",
    "ks",
    "mann_whitney",
    "min_mwu_pvalue",
    "noise_model",
    "robust_relative_spread",
    "select_for_ab",
    "successive_log_spread",
    "telemetry_problem",
]
