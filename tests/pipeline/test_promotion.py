"""Baseline promotion follows the branch line (issue 12, item 1).

Found: a manual run of an older commit was promoted to baseline; the next nightly re-announced an old
improvement. Only a run on the suite's branch that is not older than the current baseline becomes
it; an older commit, a side-branch commit or a caliber-break night is measured and reported, never
promoted, unless the explicit promote flag says so.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fake_upstream import Upstream, git

from zlops.config.settings import Config, parse_config
from zlops.model import Verdict
from zlops.steps.context import open_store
from zlops.steps.nightly import run_nightly

pytestmark = pytest.mark.slow


def _promotion(config: Config, run_key: str) -> dict[str, object]:
    run = open_store(config).get_run(run_key)
    assert run is not None
    return dict(run.meta["promotion"])


def test_an_older_commit_is_reported_never_promoted(upstream: Upstream, make_config: Callable[..., Config]) -> None:
    c1 = upstream.commit({"alpha": 1.0, "beta": 2.0}, "start")
    c2 = upstream.commit({"alpha": 0.5, "beta": 2.0}, "alpha twice as fast")
    c3 = upstream.commit({"alpha": 0.5, "beta": 2.001}, "docs")
    config = make_config()
    n1 = run_nightly(config, "fake", sha=c1, run_label="n1")
    assert n1.accepted and "first baseline" in _promotion(config, n1.run_key)["reason"]
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    assert n2.accepted and {c.case: c.verdict for c in n2.summary.comparisons}["alpha"] is Verdict.IMPROVED

    manual = run_nightly(config, "fake", sha=c1, run_label="manual-c1")  # someone measures the old commit
    assert not manual.accepted
    reason = str(_promotion(config, manual.run_key)["reason"])
    assert f"commit {c1[:7]} is older than the current baseline {c2[:7]} (nightly:fake:n2)" in reason
    assert "--promote" in reason
    store = open_store(config)
    run = store.get_run(manual.run_key)
    assert run is not None and not run.accepted and run.status.value == "done"  # measured and reported
    # the report says why, in every rendering, before the promote step ran
    assert f"baseline: not promoted: commit {c1[:7]} is older" in manual.report.table
    assert f"- Baseline: not promoted: commit {c1[:7]} is older" in manual.report.markdown.read_text()
    assert f"Baseline: not promoted: commit {c1[:7]} is older" in manual.report.html.read_text()

    # the next nightly compares with c2, not with the older re-run: no old improvement announced again
    n3 = run_nightly(config, "fake", sha=c3, run_label="n3")
    by_case = {c.case: c for c in n3.summary.comparisons}
    assert by_case["alpha"].verdict is Verdict.UNCHANGED and by_case["alpha"].base.sha == c2
    assert n3.accepted and f"newer than the current baseline {c2[:7]}" in str(_promotion(config, n3.run_key)["reason"])
    # the report of a CPU pool names the CPU's clock (item 3), never an SM clock
    md = n3.report.markdown.read_text()
    assert "CPU clock" in md and "SM clock" not in md

    # the same commit measured again moves nothing backwards: it may be promoted
    again = run_nightly(config, "fake", sha=c3, run_label="n3-again")
    assert again.accepted
    assert "the same commit as the current baseline" in str(_promotion(config, again.run_key)["reason"])

    # a backfill with the explicit flag is promoted, and says what it overrode
    backfill = run_nightly(config, "fake", sha=c1, run_label="backfill-c1", promote=True)
    assert backfill.accepted
    p = _promotion(config, backfill.run_key)
    assert p["forced"] is True and "promoted by the explicit promote flag (overriding: commit" in str(p["reason"])


def test_a_side_branch_commit_is_not_on_the_line(upstream: Upstream, make_config: Callable[..., Config]) -> None:
    c1 = upstream.commit({"alpha": 1.0}, "start")
    upstream.branch("feature", c1)
    upstream.checkout("feature")
    (upstream.path / "notes.txt").write_text("feature work\n")  # a file main does not touch: no conflict
    git(upstream.path, "add", "notes.txt")
    git(upstream.path, "commit", "-q", "-m", "feature work")
    side = git(upstream.path, "rev-parse", "HEAD")
    upstream.checkout("main")
    upstream.commit({"alpha": 1.0, "beta": 1.0}, "main moves")
    git(upstream.path, "merge", "-q", "--no-ff", "-m", "merge feature", "feature")
    merge = git(upstream.path, "rev-parse", "HEAD")
    config = make_config()
    assert run_nightly(config, "fake", sha=c1, run_label="n1").accepted
    # the merged feature commit is an ancestor of main's head and newer than c1, but not on main's line
    n = run_nightly(config, "fake", sha=side, run_label="side")
    assert not n.accepted
    assert f"commit {side[:7]} is not on main's first-parent line" in str(_promotion(config, n.run_key)["reason"])
    assert run_nightly(config, "fake", sha=merge, run_label="n2").accepted


def test_a_caliber_break_is_promoted_only_explicitly(upstream: Upstream, make_config: Callable[..., Config]) -> None:
    c1 = upstream.commit({"alpha": 1.0}, "start")
    c2 = upstream.commit({"alpha": 1.001}, "later")
    c3 = upstream.commit({"alpha": 1.002}, "later still")
    config = make_config()
    assert run_nightly(config, "fake", sha=c1, run_label="n1").accepted
    data = config.model_dump()
    data["suites"]["fake"]["rounds"] = 3  # rounds is a caliber axis: tonight measures another thing
    other = parse_config(data)
    n2 = run_nightly(other, "fake", sha=c2, run_label="n2")
    assert {c.verdict for c in n2.summary.comparisons} == {Verdict.INCOMPARABLE}
    assert not n2.accepted
    reason = str(_promotion(other, n2.run_key)["reason"])
    assert reason.startswith("caliber break: 1 series INCOMPARABLE with their baseline (!!! [caliber] rounds: 5 != 3)")
    # the person who changed the rounds accepts the new caliber once, explicitly
    n3 = run_nightly(other, "fake", sha=c3, run_label="n3", promote=True)
    assert n3.accepted and "overriding: caliber break" in str(_promotion(other, n3.run_key)["reason"])


def test_the_cli_flag_needs_a_suite(make_config: Callable[..., Config], tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import yaml

    from zlops.cli import main

    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(make_config().model_dump(mode="json")))
    assert main(["--plain", "nightly", "--config", str(path), "--promote"]) == 2
    assert "--promote needs --suite" in capsys.readouterr().err


def test_a_night_with_most_shards_failed_is_never_a_baseline(upstream: Upstream,
                                                             make_config: Callable[..., Config]) -> None:
    """8 of 9 devices crash: the night is measured and reported (done, one shard's results stored), but
    not promoted; the next full night is the baseline. promote_min_ok_share lowers the bar on purpose."""
    devices = tuple(range(9))
    crash = {str(d): "crash" for d in devices[1:]}
    c1 = upstream.commit({"alpha": 1.0}, "start", behaviour=crash)
    config = make_config(devices=devices)
    n1 = run_nightly(config, "fake", sha=c1, run_label="n1")
    reason = str(_promotion(config, n1.run_key)["reason"])
    assert not n1.accepted, reason
    assert "1 of 9 shards of pool local ended OK (failed the rest)" in reason
    assert "promote_min_ok_share 1" in reason
    run = open_store(config).get_run(n1.run_key)
    assert run is not None and run.status.value == "done" and not run.accepted
    assert "not promoted: 1 of 9 shards" in n1.report.table

    lenient = parse_config({**config.model_dump(mode="json"), "promote_min_ok_share": 0.1}, source="lenient.yaml")
    n2 = run_nightly(lenient, "fake", sha=c1, run_label="n2")
    assert n2.accepted, _promotion(lenient, n2.run_key)["reason"]
