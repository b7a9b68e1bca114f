"""`zlops report RUN` reproduces: an old run's report is rendered from what was stored at it, into a
new version folder, and the original artifacts stay byte-identical (issue 12, item 5).

Found: the report of an older run redrew its trend with nights that came after it (the step shown
at the wrong commit) and overwrote the original plot.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from fake_upstream import Upstream

from zlops.cli import main
from zlops.config.settings import Config, parse_config
from zlops.model import Verdict
from zlops.steps.context import context_for
from zlops.steps.nightly import run_nightly

pytestmark = pytest.mark.slow


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_report_of_an_old_run_after_later_nights(upstream: Upstream, make_config: Callable[..., Config],
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    c1 = upstream.commit({"alpha": 1.0, "beta": 2.0}, "start")
    c2 = upstream.commit({"alpha": 1.5, "beta": 2.0}, "alpha slower")
    c3 = upstream.commit({"alpha": 1.0, "beta": 2.0}, "alpha fixed")
    c4 = upstream.commit({"alpha": 2.0, "beta": 2.0}, "alpha slower again")
    config = make_config()
    run_nightly(config, "fake", sha=c1, run_label="n1")
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    assert {c.case: c.verdict for c in n2.summary.comparisons}["alpha"] is Verdict.REGRESSION
    run_dir = context_for(config, "fake", n2.run_key).run_dir
    trend = next(p for p in n2.report.plots if "alpha" in p.name)
    original = _digests(run_dir)
    assert f"plots/{trend.name}" in original and "report.md" in original

    # later nights, and today's config has other thresholds than the night had
    run_nightly(config, "fake", sha=c3, run_label="n3")
    run_nightly(config, "fake", sha=c4, run_label="n4")
    today = parse_config({**config.model_dump(), "thresholds": {"potential_pct": 10, "regression_pct": 60}})
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(today.model_dump(mode="json")))
    capsys.readouterr()
    assert main(["--plain", "report", n2.run_key, "--config", str(path)]) == 0
    out = capsys.readouterr().out

    after = _digests(run_dir)
    assert {k: v for k, v in after.items() if not k.startswith("rerender-")} == original  # byte-identical
    rerender = run_dir / "rerender-1"
    assert f"report: {rerender / 'report.md'}" in out
    assert "thresholds: stored with the run (meta judging): 2% / 5%" in out
    assert "history: accepted runs started before" in out and f"on the ancestor line of {c2[:12]}" in out
    # the trend is the night's: the same history, threshold band and point, byte for byte
    assert (rerender / "plots" / trend.name).read_bytes() == trend.read_bytes()
    # the notes name the classes as the night's judge meant them (zlops.model.class_bounds) with the night's
    # stored thresholds (2% / 5%), not today's (10% / 60%)
    from zlops.report.markdown import class_notes

    notes = class_notes(config.judge, 2.0, 5.0)
    assert notes and all(line in (rerender / "report.md").read_text() for line in notes), notes
    # nothing was announced again, and a second re-render never overwrites the first
    assert not (rerender / "slack_payload.json").exists()
    assert main(["--plain", "report", n2.run_key, "--config", str(path)]) == 0
    assert (run_dir / "rerender-2" / "report.md").exists()
    assert {k: v for k, v in _digests(run_dir).items() if k.startswith("rerender-1")} == \
        {k: v for k, v in after.items() if k.startswith("rerender-1")}
