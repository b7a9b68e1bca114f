"""The whole noise-aware pipeline on the real H200 A/A nights, with and without injected slowdowns."""

from __future__ import annotations

import numpy as np
import pytest

from zlops.stats import NightResult, Policy, State, confirm_ab, decide, judge_tonight

ALARM = (State.REGRESSION, State.SEVERE)


def _walk(values: list[float], policy: Policy) -> list[tuple[NightResult, State]]:
    """Judge nights 2..16 as a nightly would: history = all previous nights, confirmation by 2 nights."""
    out: list[tuple[NightResult, State]] = []
    for t in range(1, len(values)):
        night, previous = judge_tonight(values[:t], [values[t]], policy=policy)
        out.append((night, decide(night, previous=previous, policy=policy).state))
    return out


def test_plain_2pct_rule_cries_wolf_on_the_real_a_a_nights(real_noise: dict[str, list[float]]) -> None:
    # the README's figure: 15 of 165 do_bench case-night pairs are > 2% slower than the night before
    flagged = sum(v[t] / v[t - 1] > 1.02 for k, v in real_noise.items() if k.endswith("do_bench_ms")
                  for t in range(1, len(v)))
    assert flagged == 15


def test_no_real_a_a_case_night_is_judged_a_regression(real_noise: dict[str, list[float]]) -> None:
    policy = Policy()
    for key, values in real_noise.items():
        states = [final for _, final in _walk(values, policy)]
        assert not any(s in ALARM for s in states), (key, states)


def test_tiny_kernels_are_reported_unmeasurable_not_flagged(real_noise: dict[str, list[float]]) -> None:
    states = [night.state for night, _ in _walk(real_noise["softmax_small/do_bench_ms"], Policy())]
    assert states[-1] is State.UNMEASURABLE
    assert State.SUSPECT not in states[6:]   # once calibrated, its +8% mode never raises a suspect


@pytest.mark.parametrize("slowdown", [5.0, 10.0])
def test_injected_slowdowns_in_quiet_real_series_are_confirmed_within_two_nights(
        quiet_series: dict[str, list[float]], slowdown: float) -> None:
    policy = Policy()
    t0 = 10
    for key, values in quiet_series.items():
        y = [v * (1 + slowdown / 100) if i >= t0 else v for i, v in enumerate(values)]
        walk = _walk(y, policy)
        night0, final0 = walk[t0 - 1]
        _, final1 = walk[t0]
        assert night0.state is State.SUSPECT, key
        assert final0 not in ALARM                 # nobody is alerted on the first night alone
        assert final1 in ALARM, key
        if slowdown == 10.0:
            assert final1 is State.SEVERE, key


def test_ab_drawn_from_real_noise_confirms_a_5pct_slowdown_and_not_a_null(
        quiet_series: dict[str, list[float]]) -> None:
    rng = np.random.default_rng(0)
    for key, values in quiet_series.items():
        split = rng.permutation(np.array(values))
        base, head = split[:8].tolist(), split[8:].tolist()
        assert confirm_ab(base, [h * 1.05 for h in head], seed=1).state in ALARM, key
        assert confirm_ab(base, head, seed=1).state is State.UNCHANGED, key
