"""The demo upstream's PR branch (issue 15): a real change, one commit off main, that a PR compare finds."""

from __future__ import annotations

from pathlib import Path

import pytest
from timing import real_timings

from zlops.demo import HISTORY, PR_BRANCH, create_upstream, demo_config_data
from zlops.host import gitops

BRANCH, MESSAGE, FILES, EXPECTED = PR_BRANCH



def test_the_branch_is_one_commit_off_main_changing_softmax_only(tmp_path: Path) -> None:
    shas = create_upstream(tmp_path / "upstream")
    repo = ["-C", str(tmp_path / "upstream")]
    assert len(shas) == len(HISTORY)
    assert gitops.git([*repo, "rev-parse", "main"]).strip() == shas[-1]  # main is checked out, unchanged
    assert gitops.git([*repo, "rev-parse", "--abbrev-ref", "HEAD"]).strip() == "main"
    head = gitops.git([*repo, "rev-parse", BRANCH]).strip()
    assert gitops.git([*repo, "rev-parse", f"{BRANCH}^"]).strip() == shas[-1]
    assert gitops.git([*repo, "log", "-1", "--format=%s", head]).strip() == MESSAGE
    assert gitops.git([*repo, "diff", "--name-only", "main", BRANCH]).split() == ["demo_ops/ops.py"]
    diff = gitops.git([*repo, "diff", "-U0", "main", BRANCH, "--", "demo_ops/ops.py"])
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert any("_tiled(\"softmax\"" in line for line in changed if line.startswith("-"))  # the tiling goes
    assert not any("layernorm" in line or "gelu" in line for line in changed)
    # fixed author and dates: the same SHA on every machine, like main's
    again = create_upstream(tmp_path / "again")
    assert gitops.git(["-C", str(tmp_path / "again"), "rev-parse", BRANCH]).strip() == head and again == shas


@pytest.mark.slow
@real_timings
def test_a_pr_compare_of_the_branch_finds_softmax_faster(tmp_path: Path) -> None:
    from zlops.config.settings import parse_config
    from zlops.forge.prcompare import run_compare
    from zlops.model import Verdict

    home = tmp_path / "demo"
    create_upstream(home / "upstream")
    config = parse_config(demo_config_data(home, rounds=5, workers=3))
    outcome = run_compare(config, {"suite": "demo-ops", "ref": BRANCH, "pairs": 1})
    rows = {c.case: c for rows in outcome.comparisons.values() for c in rows}
    assert set(rows) == {"cumsum", "gelu", "layernorm", "matmul", "softmax"}
    assert rows["softmax"].verdict is EXPECTED["softmax"] is Verdict.IMPROVED
    assert rows["softmax"].judgement.change_pct is not None and rows["softmax"].judgement.change_pct < -15
    assert all(abs(c.judgement.change_pct or 0) < 5 for name, c in rows.items() if name != "softmax")
