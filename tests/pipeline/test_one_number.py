"""Issue 12: one honest number per change, everywhere.

A real nightly (fake upstream, noise judge) where the judge's reference (the median of the last
nights) differs from the baseline night's median: the case the user found, where Change (%) came
from the judge and Base/HEAD from the baseline, so a row disagreed with itself. The run is rendered
every way (text table, markdown, HTML, Slack summary, the alert's thread message, ``zlops alert
list``); every rendering must show the same Base, HEAD and change, and the change must be
(HEAD - Base) / Base of the numbers shown beside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_upstream import Upstream

from zlops.cli import main
from zlops.config.settings import Config, parse_config
from zlops.model import Verdict
from zlops.report import cells
from zlops.steps.nightly import run_nightly

pytestmark = pytest.mark.slow


def _renderings_agree(run_dir: Path, case: str, c: object) -> tuple[str, str, str]:
    """Base, HEAD and change of ``c`` as every report file of ``run_dir`` shows them (asserted equal)."""
    base, head = c.base_value, c.head_value  # type: ignore[attr-defined]
    assert base is not None and head is not None
    change = cells.fmt_change(c.judgement.change_pct)  # type: ignore[attr-defined]
    # the change is computed from exactly the two numbers shown
    assert c.judgement.change_pct == pytest.approx((head - base) / base * 100, rel=1e-12)  # type: ignore[attr-defined]
    b, h = cells.fmt_value(base, c.unit), cells.fmt_value(head, c.unit)  # type: ignore[attr-defined]
    text = (run_dir / "report.txt").read_text()
    row = next(ln for ln in text.splitlines() if ln.startswith(case))
    assert b in row and h in row and change in row, row
    md = (run_dir / "report.md").read_text()
    assert re.search(rf"\| (\*\*)?{case}(\*\*)? \| (\*\*)?time(\*\*)? \| (\*\*)?{re.escape(b)}(\*\*)? \| "
                     rf"(\*\*)?{re.escape(h)}(\*\*)? \| [^|]+ \| (\*\*)?{re.escape(change)}", md), md
    html = (run_dir / "report.html").read_text()
    assert f"<td class=num>{b}</td><td class=num>{h}</td>" in html and f"<td class=num>{change}</td>" in html
    return b, h, change


def test_every_rendering_shows_the_verdicts_own_numbers(upstream: Upstream, make_config: Callable[..., Config],
                                                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = make_config().model_dump(mode="json")
    data.update(judge="noise", noise={"ab_pairs": 7, "ab_budget_s": 600, "min_nights": 4, "window": 8})
    config = parse_config(data)
    # quiet nights whose medians differ a little: the reference (median of the nights) is 1.0 ms while
    # the baseline night (the last one) is 1.01 ms
    for i, alpha in enumerate([1.0, 0.99, 1.0, 1.01, 0.995, 1.01]):
        sha = upstream.commit({"alpha": alpha, "beta": 2.0}, f"quiet {i}")
        run_nightly(config, "fake", sha=sha, run_label=f"q{i}")
    step = upstream.commit({"alpha": 1.25, "beta": 2.0}, "alpha 25% slower")

    # 1. screening only (no A/B): a suspect, judged against the median of the nights
    screen_only = parse_config({**data, "noise": {**data["noise"], "ab_pairs": 0}})
    night = run_nightly(screen_only, "fake", sha=step, run_label="step")
    alpha = {c.case: c for c in night.summary.comparisons}["alpha"]
    assert alpha.verdict is Verdict.SUSPECT and alpha.figures is not None
    assert alpha.figures.reference_label.startswith("median of")
    # exactly the case that used to disagree: the reference is not the baseline night's median
    assert alpha.base is not None and alpha.base.median != pytest.approx(alpha.figures.reference)
    run_dir = night.report.markdown.parent
    b, h, change = _renderings_agree(run_dir, "alpha", alpha)
    slack = json.loads((run_dir / "slack_payload.json").read_text())["payload"]
    assert f"*{change}*  {b} → {h}" in json.dumps(slack, ensure_ascii=False)
    assert "1 suspects" in slack["text"]

    # 2. the same commit again: severe (a second night confirms it), the figures still the verdict's own
    night = run_nightly(config, "fake", sha=step, run_label="step2")
    alpha = {c.case: c for c in night.summary.comparisons}["alpha"]
    assert alpha.verdict is Verdict.SEVERE and alpha.figures is not None, alpha.judgement.note
    run_dir = night.report.markdown.parent
    b, h, change = _renderings_agree(run_dir, "alpha", alpha)
    slack = json.loads((run_dir / "slack_payload.json").read_text())["payload"]
    assert f"*{change}*  {b} → {h}" in json.dumps(slack, ensure_ascii=False)
    assert "1 severe" in slack["text"]   # the notification preview counts it

    # the alert the judge confirmed carries the same figure, in `zlops alert list` and in its thread
    cfg = tmp_path / "zlops.yaml"
    cfg.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["alert", "list", "--config", str(cfg)]) == 0
    listed = capsys.readouterr().out
    assert change in listed, listed
    from zlops.steps.context import open_store

    items = open_store(config).outbox_items(statuses=("pending", "failed", "sent", "abandoned"),
                                            run_key=night.summary.run_key)
    threads = [json.dumps(i.payload, ensure_ascii=False) for i in items if "New regression" in json.dumps(i.payload)]
    assert threads and all(f"*{change}*  {b} → {h}" in t for t in threads), threads
    # the run keeps what it was judged with (issue 13): a later report or rescore reads it from there
    meta = open_store(config).get_run(night.summary.run_key).meta
    assert meta["judging"]["judge"] == "noise" and meta["judging"]["policy"]["window"] == 8
