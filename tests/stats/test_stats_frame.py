"""The vectorized judge (zlops.stats.frame) gives exactly the per-series judge's verdicts (issue 13)."""

from __future__ import annotations

import numpy as np
import pytest

from zlops.judge.judges import noise_judge
from zlops.model import Thresholds
from zlops.stats import Policy, State
from zlops.stats.decide import SAME_CODE_PENDING
from zlops.stats.frame import judge_many


def _per_series(history: list[float], tonight: list[float], lower: bool, policy: Policy,
                telemetry: dict | None = None) -> object:
    return noise_judge(tonight, tonight, lower, Thresholds(policy.potential_pct, policy.regression_pct),
                       history=history, telemetry=telemetry, policy=policy)


def _check(cases: list[tuple[list[float], list[float], bool, dict | None]], policy: Policy) -> int:
    got = judge_many([c[0] for c in cases], [c[1] for c in cases], [c[2] for c in cases], policy=policy,
                     telemetry=[c[3] for c in cases])
    fast = 0
    for (hist, tonight, lower, tel), fv in zip(cases, got, strict=True):
        want = _per_series(hist, tonight, lower, policy, tel)
        if fv is None:
            continue
        fast += 1
        assert fv.state.value == want.verdict.value, (hist, tonight, fv, want)
        assert fv.reason == want.note, (fv.reason, want.note)
        assert want.figures is not None
        assert fv.reference == pytest.approx(want.figures.reference, rel=1e-12)
        assert fv.value == pytest.approx(want.figures.value, rel=1e-12)
        assert fv.reference_text == want.figures.reference_label
        assert fv.threshold_pct == pytest.approx(want.threshold_pct, rel=1e-12)
        assert fv.change_pct == pytest.approx(want.change_pct, rel=1e-9, abs=1e-12)
    return fast


def test_the_vectorized_judge_agrees_on_the_real_h200_a_a_nights(real_noise: dict[str, list[float]]) -> None:
    cases = []
    for values in real_noise.values():
        for t in range(2, len(values)):
            cases.append((values[:t], [values[t]], True, None))
            cases.append((values[:t], [values[t] * 1.05], True, None))   # an injected 5% slowdown
            cases.append((values[:t], [values[t] * 0.9], False, None))   # throughput direction
    fast = _check(cases, Policy())
    assert fast >= len(cases) // 2   # most of the real corpus takes the fast path


def test_the_vectorized_judge_agrees_on_synthetic_series() -> None:
    rng = np.random.default_rng(11)
    cases = []
    for i in range(400):
        noise = [0.001, 0.003, 0.01, 0.03][i % 4]
        nights = int(rng.integers(2, 40))
        hist = list(100 * np.exp(rng.normal(0, noise, nights)))
        if i % 5 == 0:                                   # last night stepped (a held-out suspect)
            hist[-1] *= 1.08
        if i % 7 == 0:                                   # and tonight too: two-night confirmation
            hist[-2] *= 1.08
        step = [1.0, 1.04, 1.1, 0.9, 1.5][i % 5]
        tonight = list(100 * step * np.exp(rng.normal(0, noise, int(rng.integers(1, 12)))))
        tel = {"below_90pct_peak_share": 0.5} if i % 23 == 0 else None
        cases.append((hist, tonight, bool(i % 3), tel))
    for i in range(40):   # clear steps before the process levels are known (3-5 nights): they wait for an A/B
        stable = list(100 * np.exp(rng.normal(0, 0.0005, 3 + i % 3)))
        step = [2.0, 0.5, 1.03, 1.5][i % 4]
        cases.append(([*stable, 100 * step], [100 * step * (1 + 0.0001 * j) for j in range(3)], bool(i % 2), None))
    for i in range(40):   # large falls and rises of throughputs and times on calibrated series: log ratios
        hist = list(100 * np.exp(rng.normal(0, [0.003, 0.01][i % 2], 8 + i % 5)))
        step = [0.15, 0.4, 6.7, 2.5, 0.97][i % 5]
        if i % 3 == 0:
            hist[-1] *= step                              # last night already there: two nights
        cases.append((hist, [float(np.median(hist)) * step], bool(i % 2), None))
    fast = _check(cases, Policy())
    assert fast >= 240
    early = cases[-80:-40]
    got = judge_many([c[0] for c in early], [c[1] for c in early], [c[2] for c in early], policy=Policy())
    assert sum(1 for g in got if g is not None and "too few for nights alone" in g.reason) >= 20
    assert not [g for g in got if g is not None and g.state in (State.SEVERE, State.REGRESSION, State.IMPROVED)]
    late = cases[-40:]
    got = judge_many([c[0] for c in late], [c[1] for c in late], [c[2] for c in late], policy=Policy())
    assert sum(1 for g in got if g is not None and g.state in (State.SEVERE, State.IMPROVED)) >= 8
    assert _check(cases[:120], Policy(min_samples=3, window=10, min_nights=4, k=2.0)) > 0


def test_the_vectorized_judge_agrees_where_last_night_is_settled_by_its_stored_verdict() -> None:
    """Issue 22: a last night an A/B cleared (or found process levels in) is neither held out nor last
    night's suspect, in both paths: a 10% night settled that way is history, not a pending step."""
    rng = np.random.default_rng(5)
    cases = []
    for i in range(60):
        hist = list(100 * np.exp(rng.normal(0, [0.002, 0.01][i % 2], 7 + i % 6)))
        hist[-1] *= [1.1, 0.9, 1.0][i % 3]
        cases.append((hist, [float(np.median(hist)) * [1.1, 1.0, 0.9][i % 3]], bool(i % 4), i % 5 != 0))
    pol = Policy()
    got = judge_many([c[0] for c in cases], [c[1] for c in cases], [c[2] for c in cases], policy=pol,
                     settled=[c[3] for c in cases])
    fast = 0
    for (hist, tonight, lower, settled), fv in zip(cases, got, strict=True):
        want = noise_judge(tonight, tonight, lower, Thresholds(pol.potential_pct, pol.regression_pct),
                           history=hist, policy=pol, last_settled=settled)
        if fv is None:
            continue
        fast += 1
        assert (fv.state.value, fv.reason) == (want.verdict.value, want.note)
        if settled:
            assert "consecutive" not in fv.reason and "second suspect night" not in fv.reason
    assert fast >= 20


def test_the_vectorized_judge_agrees_where_the_suspect_nights_began_on_unchanged_code() -> None:
    """Issue 22: both paths keep a second suspect night a suspect when its first suspect night ran the code of the
    night before it (a ``hold``), and both confirm the same figures without it."""
    rng = np.random.default_rng(11)
    cases = []
    for i in range(40):
        hist = list(100 * np.exp(rng.normal(0, 0.002, 8 + i % 4)))
        step = [1.5, 0.6, 1.3, 1.0][i % 4]
        hist.append(float(np.median(hist)) * step)
        cases.append((hist, [float(np.median(hist[:-1])) * step * 1.01], bool(i % 5), i % 2 == 0))
    pol = Policy()
    got = judge_many([c[0] for c in cases], [c[1] for c in cases], [c[2] for c in cases], policy=pol,
                     hold=[SAME_CODE_PENDING if c[3] else None for c in cases])
    fast = confirmed = kept = 0
    for (hist, tonight, lower, same), fv in zip(cases, got, strict=True):
        want = noise_judge(tonight, tonight, lower, Thresholds(pol.potential_pct, pol.regression_pct),
                           history=hist, policy=pol, hold=SAME_CODE_PENDING if same else None)
        if fv is None:
            continue
        fast += 1
        assert (fv.state.value, fv.reason) == (want.verdict.value, want.note)
        if fv.state.value in ("severe", "regression", "improved"):
            assert not same
            confirmed += 1
        if same and fv.state.value in ("suspect", "suspect_improved"):
            assert fv.reason.startswith("a second suspect night, not confirmed: the first suspect night ran the same")
            kept += 1
    assert fast >= 20 and confirmed >= 5 and kept >= 5
