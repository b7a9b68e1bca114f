"""What the demo's summary says when its check fails because the host is noisy (no timing: fabricated nights)."""

from __future__ import annotations

from pathlib import Path

from zlops.demo import HISTORY, OPS, DemoNight, DemoResult, check, render_summary, untouched_moves
from zlops.model import Verdict


def _nights(noise: float) -> list[DemoNight]:
    nights = []
    for i, (subject, _, expected) in enumerate(HISTORY, start=1):
        verdicts = {}
        for op in OPS:
            if i == 1:
                verdicts[op] = (Verdict.NEW, None)
            elif op in expected:
                verdicts[op] = (expected[op], 35.0 if expected[op] is Verdict.REGRESSION else -33.0)
            else:
                verdicts[op] = (Verdict.REGRESSION if noise > 5 else Verdict.UNCHANGED, noise)
        nights.append(DemoNight(i, f"{i:040x}", subject, f"nightly:demo-ops:n{i}", verdicts))
    return nights


def _result(nights: list[DemoNight]) -> DemoResult:
    problems, notes = check(nights)
    return DemoResult(Path("/demo"), Path("/demo/zlops.yaml"), nights, problems, notes)


def test_a_noisy_host_is_named_as_the_reason_with_its_figure() -> None:
    nights = _nights(9.3)
    assert max(untouched_moves(nights)) == 9.3
    text = render_summary(_result(nights))
    assert "check FAILED" in text
    assert "moved by up to 9.3% between nights on this host" in text and "zlops demo --judge noise" in text


def test_a_quiet_host_passes_without_the_noise_sentence() -> None:
    text = render_summary(_result(_nights(0.4)))
    assert "check: softmax flagged" in text and "timing noise" not in text


def test_a_missed_scripted_change_on_a_quiet_host_does_not_blame_the_host() -> None:
    nights = _nights(0.4)
    nights[2].verdicts["softmax"] = (Verdict.UNCHANGED, 0.5)   # the judge missed night 3's regression
    text = render_summary(_result(nights))
    assert "check FAILED" in text and "softmax was unchanged" in text and "timing noise" not in text
