"""What the check and the flush say: each change in its direction (zlops.model.change_text), the pairs the A/B
ran beside those asked for, a suspect improvement that never holds a PR, and a config without Slack that
neither queues a message no flush could send nor fails ``zlops alert flush``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from fake_forge import GITHUB_TOKEN, FakeForge
from forge_helpers import HEAD, outcome, row, secrets_for

from zlops.cli import main
from zlops.config.settings import Config, load_config
from zlops.forge.deliver import ForgeSecrets
from zlops.forge.prcompare import check_of, post_outcome, render, report
from zlops.model import Figures, Verdict, change_text
from zlops.steps.context import open_store


def test_a_change_reads_in_its_direction() -> None:
    assert change_text(-18.74, -18.74) == "-18.74% (better)"
    assert change_text(3.1, 3.1) == "+3.10% worse"
    assert change_text(25.0, -20.0) == "+25.00% (better by 20.0%)"


def test_the_check_words_each_change_in_its_direction_and_a_suspect_improvement_holds_nothing(
        forge_config: Callable[..., Config]) -> None:
    config = forge_config()
    better = row("beta", Verdict.SUSPECT_IMPROVED, 1.0, 0.9871, note="A/B 7+7: -1.29% (better)")
    check = check_of(config, outcome(config, [row("alpha", Verdict.UNCHANGED, 1, 1), better]))
    assert check.conclusion == "success" and check.title == "no regression in 2 series"
    assert "Better, not confirmed (no effect on the conclusion):" in check.summary
    assert "- `beta` (time) **suspect improvement** -1.29% (better): A/B 7+7" in check.summary
    assert "Not decided" not in check.summary
    worse = check_of(config, outcome(config, [row("alpha", Verdict.SEVERE, 1, 2)], key="pr:ops:2"))
    assert worse.title == "1 regression beyond regression: alpha +100.00% worse"
    (listed,) = worse.listed
    assert listed.change == "+100.00% worse"
    # a throughput (higher is better) that fell: worse, by the ratio the judge weighs
    fell = dataclasses.replace(row("bw", Verdict.SEVERE, 100.0, 50.0), lower_is_better=False)
    fell = dataclasses.replace(fell, judgement=dataclasses.replace(fell.judgement, figures=Figures(
        reference=100.0, reference_label="merge-base", value=50.0, value_label="HEAD", lower_is_better=False,
        unit="GB/s", threshold_pct=2.0)))
    (listed,) = check_of(config, outcome(config, [fell], key="pr:ops:3")).listed
    assert listed.change == "-50.00% (worse by 100.0%)"


def test_the_args_line_says_the_pairs_the_ab_ran(forge_config: Callable[..., Config]) -> None:
    config = forge_config()
    done = outcome(config, [row("alpha", Verdict.UNCHANGED, 1, 1)])
    assert "pairs 1, judge simple" in render(config, done)
    ran = dataclasses.replace(done, pairs_run=7)
    text = render(config, ran)
    assert "pairs 7 run (1 asked), judge simple" in text and "pairs 1," not in text
    assert "pairs 7 run (1 asked)" in check_of(config, ran).summary


def test_without_a_slack_section_nothing_waits_for_slack_and_alert_flush_succeeds(
        tmp_path: Path, forge: FakeForge, forge_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    config = forge_config()
    assert config.slack is None
    done = outcome(config, [row("alpha", Verdict.SEVERE, 1, 2)])
    out = report(config, done, forge_secrets=lambda f: ForgeSecrets())   # no token yet: the check waits
    assert out.slack.status == "written" and "no slack section" in (out.slack.error or "")
    store = open_store(config)
    assert store.outbox_items(exclude_kinds=("forge-check",)) == []       # nothing queued for Slack
    assert [i.kind for i in store.outbox_items()] == ["forge-check"]
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump({
        "home": str(config.home), "pools": {"local": {"backend": "cpu", "devices": [0]}}, "judge": "simple",
        "suites": {"ops": {"command": ["python", "b.py", "--out", "{results}"], "format": "zlops-json",
                           "pools": ["local"], "repo": str(tmp_path / "upstream"),
                           "forge": {"kind": "github", "api_url": forge.github_url, "repo": "acme/kernels",
                                     "check_name": "zlops perf"}}}}))
    assert load_config(path).database_url == config.database_url
    monkeypatch.setenv("ZLOPS_FORGE_TOKEN", GITHUB_TOKEN)
    assert main(["alert", "flush", "--config", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "forge checks: sent 1" in printed and "slack: no slack section in the config; no message waits" in printed
    (run,) = forge.state.runs_on(HEAD)
    assert run["conclusion"] == "failure"


def test_a_compare_that_concludes_closes_the_check_the_receiver_opened(
        forge: FakeForge, forge_config: Callable[..., Config]) -> None:
    from zlops.forge.lifecycle import LOCAL, open_check
    from zlops.store import forge as rows

    config = forge_config()
    store = open_store(config)
    gh = config.suites["ops"].forge
    assert gh is not None
    open_check(store, gh, secrets_for, suite="ops", head_sha=HEAD, ref="feature/x", who="alice", pr=7,
               run_id="forge__1", runner=LOCAL)
    # the branch moved while it ran: the compare concluded on another commit; the old one is closed, saying so
    moved = "e" * 40
    post_outcome(config, store, outcome(config, [row("alpha", Verdict.UNCHANGED, 1, 1)], head=moved),
                 secrets=secrets_for, forge_run="forge__1")
    old = forge.state.runs_on(HEAD)[0]
    assert old["conclusion"] == "neutral" and f"the branch moved to {moved[:12]}" in old["output"]["title"]
    assert forge.state.runs_on(moved)[0]["conclusion"] == "success"
    assert store.read(rows.checks) == []
