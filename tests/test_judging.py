"""The judging setup: built once from the config, stored with the run, read back (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zlops.config.settings import parse_config
from zlops.judge import setup as judging


def _config(tmp_path: Path, **extra: object):
    return parse_config({"home": str(tmp_path), "pools": {"p": {"backend": "cpu", "devices": [0]}},
                         "suites": {"s": {"repo": str(tmp_path), "command": ["x"], "format": "zlops-json",
                                          "pools": ["p"]}}, **extra})


def test_the_setup_round_trips_through_the_run_meta(tmp_path: Path) -> None:
    config = _config(tmp_path, judge="noise", thresholds={"potential_pct": 3, "regression_pct": 7},
                     noise={"k": 2.5, "window": 12, "min_nights": 4}, allow_caliber_mismatch=True)
    setup = judging.from_config(config)
    assert setup.policy is not None and setup.policy.potential_pct == 3 and setup.policy.k == 2.5
    back, note = judging.for_run({"judging": setup.to_dict()}, _config(tmp_path))
    assert back == setup and "stored with the run" in note


def test_an_old_run_without_a_setup_says_it_uses_todays_config(tmp_path: Path) -> None:
    config = _config(tmp_path, thresholds={"potential_pct": 4, "regression_pct": 8})
    setup, note = judging.for_run({}, config)
    assert setup.pcts == (4, 8) and "today's config" in note
    bad, note = judging.for_run({"judging": {"schema_version": 99}}, config)
    assert bad.pcts == (4, 8) and "unreadable" in note


def test_a_noise_setup_needs_a_policy() -> None:
    from zlops.model import Thresholds

    with pytest.raises(ValueError, match="policy"):
        judging.JudgingSetup("noise", Thresholds())
    with pytest.raises(ValueError, match="simple or noise"):
        judging.JudgingSetup("magic", Thresholds())
