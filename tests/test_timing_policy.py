"""The real-timing tests' policy (tests/timing.py): a failure on a noisy host is a skip with the figure,
on a quiet one it stays a failure."""

from __future__ import annotations

import pytest
import timing


def _failing() -> None:
    raise AssertionError("the judge got it wrong")


def test_a_failure_on_a_noisy_host_is_skipped_with_the_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "host_aa_noise", lambda: (9.4, "cumsum medians 3.500-3.829 ms"))
    with pytest.raises(pytest.skip.Exception, match=r"A/A noise is 9\.4% right now \(cumsum medians"):
        timing.real_timings(_failing)()


def test_the_skip_names_the_test_not_the_line_of_timing_py(monkeypatch: pytest.MonkeyPatch,
                                                          request: pytest.FixtureRequest) -> None:
    """pytest shows a skip at the line that raised it (tests/timing.py:NN), so the reason names the test."""
    monkeypatch.setattr(timing, "host_aa_noise", lambda: (9.4, "cumsum medians 3.500-3.829 ms"))
    with pytest.raises(pytest.skip.Exception) as skipped:
        timing.real_timings(_failing)()
    assert str(skipped.value.msg).startswith(f"{request.node.nodeid}: the host's own A/A noise is 9.4%")


def test_a_failure_on_a_quiet_host_stays_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "host_aa_noise", lambda: (1.2, "exp medians 1.200-1.214 ms"))
    with pytest.raises(AssertionError, match="the judge got it wrong"):
        timing.real_timings(_failing)()


def test_a_pass_never_measures_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "host_aa_noise", lambda: pytest.fail("measured although the test passed"))
    def passing() -> int:
        return 7

    assert timing.real_timings(passing)() == 7


@pytest.mark.slow
def test_the_probe_measures_this_host() -> None:
    noise, where = timing.host_aa_noise(processes=2)
    assert noise >= 0 and where.split()[0] in ("cumsum", "exp", "matmul") and "ms" in where
