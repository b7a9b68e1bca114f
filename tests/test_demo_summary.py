"""What the demo's summary says when its check fails because the host is noisy (no timing: fabricated nights)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zlops.demo import (
    EXIT_NOT_MEASURED,
    HISTORY,
    OPS,
    DemoNight,
    DemoResult,
    check,
    render_summary,
    unmeasured,
    untouched_moves,
)
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


def test_a_host_busy_for_the_whole_budget_could_not_measure_says_so_and_exits_5(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    nights = _nights(0.4)
    busy = ("shard cpu-local/0 invalid: host busy: no balanced pair of base and head runs within the paired "
            "budget (240 s): 12 pair(s) discarded, the first for pair 1 (B): host load unbalanced: other "
            "processes used 12% CPU during the base run and 190% during the head run (difference limit 50%)")
    nights[2].invalid = busy
    nights[2].verdicts = {op: (Verdict.INVALID, None) for op in OPS}
    problems, notes = check(nights, paired=True)
    result = DemoResult(Path("/demo"), Path("/demo/zlops.yaml"), nights, problems, notes,
                        unmeasured=unmeasured(nights), measure="paired", load=(7.9, 8.4), seconds=301.0)
    assert problems == [] and not result.ok and result.could_not_measure
    text = render_summary(result)
    assert "could not measure: the host was too busy to measure 1 night(s) or series (load average 7.9" in text
    assert "190% during the head run" in text and "check FAILED" not in text
    assert "Exit status 5: could not measure (a failed check exits 1)" in text
    # the CLI's exit status says which
    import zlops.demo
    from zlops.cli import main

    monkeypatch.setattr(zlops.demo, "run_demo", lambda *a, **k: result)
    assert main(["--plain", "demo", "--home", "/tmp/unused"]) == EXIT_NOT_MEASURED == 5
    failed = DemoResult(Path("/demo"), Path("/demo/zlops.yaml"), nights, ["night 3: softmax was unchanged"], [],
                        unmeasured=unmeasured(nights), measure="paired")
    monkeypatch.setattr(zlops.demo, "run_demo", lambda *a, **k: failed)
    assert main(["--plain", "demo", "--home", "/tmp/unused"]) == 1
    capsys.readouterr()


def test_paired_inconclusive_untouched_operators_are_notes_a_missed_change_is_a_problem() -> None:
    nights = _nights(0.4)
    nights[1].verdicts["gelu"] = (Verdict.SUSPECT, 9.0)          # inconclusive, whatever its size
    problems, notes = check(nights, paired=True)
    assert problems == [] and notes == ["night 2 (" + nights[1].sha[:10] + "): gelu inconclusive (+9.00%): the "
                                        "pairs neither confirmed nor cleared it"]
    assert check(nights)[0]   # the plain night's rule: beyond 5% is a problem
    nights[2].verdicts["softmax"] = (Verdict.SUSPECT, 41.0)      # the scripted change left inconclusive: missed
    assert any("softmax was suspect" in p for p in check(nights, paired=True)[0])
