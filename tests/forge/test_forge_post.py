"""The check on the PR over real HTTP (tests/fake_forge.py): conclusions, the report's own figures,
re-runs updating the same check, the commit-status fallback, GitLab's status + MR note, and an outage
that the outbox survives."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from fake_forge import GITHUB_TOKEN, GITLAB_TOKEN, FakeForge
from forge_helpers import HEAD, outcome, row, secrets_for

from zlops.config.settings import Config
from zlops.forge.check import changed, conclude
from zlops.forge.deliver import flush_checks
from zlops.forge.prcompare import post_outcome, render
from zlops.model import Verdict
from zlops.steps.context import open_store


def test_conclusions_follow_the_failure_class() -> None:
    rows = [row("a", Verdict.UNCHANGED, 1, 1), row("b", Verdict.POTENTIAL, 1, 1.03)]
    assert conclude(rows, fail_on="regression")[0] == "neutral"       # flagged below the class: listed
    assert conclude(rows, fail_on="potential")[0] == "failure"
    assert conclude([row("a", Verdict.UNCHANGED, 1, 1), row("c", Verdict.IMPROVED, 1, 0.5)],
                    fail_on="regression")[0] == "success"
    assert conclude([row("s", Verdict.SEVERE, 1, 2)], fail_on="severe")[0] == "failure"
    assert conclude([row("r", Verdict.REGRESSION, 1, 1.1)], fail_on="severe")[0] == "neutral"
    for v in (Verdict.SUSPECT, Verdict.UNMEASURABLE, Verdict.INVALID, Verdict.INCOMPARABLE, Verdict.MISSING):
        assert conclude([row("a", Verdict.UNCHANGED, 1, 1), row("x", v, 1, 1.04)], fail_on="regression")[0] == "neutral"
    assert conclude([row("a", Verdict.UNCHANGED, 1, 1)], fail_on="regression", errors=["head crashed"])[0] == "neutral"


def _table_rows(text: str) -> dict[str, list[str]]:
    """Case rows of a compare table, split on blanks (column widths depend on the rows shown)."""
    return {ln.split()[0]: ln.split() for ln in text.splitlines() if ln[:1].isalpha() and "  " in ln
            and not ln.startswith(("Example", "Merge-base", "Args", "Device", "Overall"))}


@pytest.mark.parametrize(("rows", "conclusion", "named"), [
    ([row("alpha", Verdict.UNCHANGED, 1.0, 1.0), row("beta", Verdict.IMPROVED, 2.0, 1.0)], "success", []),
    ([row("alpha", Verdict.UNCHANGED, 1.0, 1.0), row("gamma", Verdict.UNMEASURABLE, 1.0, 1.04,
                                                     note="bimodal 1/1.08: unmeasurable at 2%")], "neutral", ["gamma"]),
    ([row("alpha", Verdict.SEVERE, 1.0, 2.0), row("beta", Verdict.SUSPECT, 2.0, 2.1)], "failure", ["alpha", "beta"]),
])
def test_github_check_run_says_the_conclusion_with_the_reports_figures(
        forge: FakeForge, forge_config: Callable[..., Config], rows: list, conclusion: str, named: list[str]) -> None:
    config = forge_config()
    done = outcome(config, rows)
    result = post_outcome(config, open_store(config), done, secrets=secrets_for)
    assert result is not None and result.status == "sent", result
    (run,) = forge.state.runs_on(HEAD)
    assert run["name"] == "zlops perf" and run["status"] == "completed" and run["conclusion"] == conclusion
    assert run["external_id"] == "zlops:ops"
    assert run["details_url"] == "https://airflow.example.com/zlops/run?key=pr%3Aops%3A1%3Ahead"
    summary = run["output"]["summary"]
    report = render(config, done)
    shown = _table_rows(summary.split("```")[1])
    full = _table_rows(report)
    # the changed series, each with exactly the report's cells; unchanged ones left out, counted
    assert set(shown) == {c.case for c in rows if changed(c)}
    assert all(shown[case] == full[case] for case in shown)
    overall = next(ln for ln in report.splitlines() if ln.startswith("Overall:"))
    assert overall in summary
    for case in named:
        assert f"`{case}` (time)" in summary and f"series?suite=ops&pool=local&case={case}&metric=time" in summary
    if conclusion == "neutral":
        assert "gamma" in run["output"]["title"] and "unmeasurable" in run["output"]["title"]
        assert "bimodal 1/1.08" in summary


def test_a_rerun_updates_the_same_check_and_an_older_post_never_overwrites_it(
        forge: FakeForge, forge_config: Callable[..., Config]) -> None:
    config = forge_config()
    store = open_store(config)
    post_outcome(config, store, outcome(config, [row("alpha", Verdict.SEVERE, 1, 2)], key="pr:ops:1"),
                 secrets=secrets_for)
    post_outcome(config, store, outcome(config, [row("alpha", Verdict.UNCHANGED, 1, 1)], key="pr:ops:2"),
                 secrets=secrets_for)
    (run,) = forge.state.runs_on(HEAD)   # one check, updated in place
    assert run["conclusion"] == "success"
    assert [m for m, p, _ in forge.state.calls if "check-runs" in p and m != "GET"] == ["POST", "PATCH"]


def test_a_token_that_cannot_create_check_runs_posts_a_commit_status(
        forge: FakeForge, forge_config: Callable[..., Config]) -> None:
    forge.state.checks_forbidden = True
    config = forge_config()
    result = post_outcome(config, open_store(config), outcome(config, [
        row("alpha", Verdict.UNCHANGED, 1, 1), row("gamma", Verdict.SUSPECT, 1, 1.05)]), secrets=secrets_for)
    assert result is not None and result.status == "sent" and result.posted["via"] == "status"
    assert forge.state.check_runs == []
    (status,) = forge.state.statuses
    assert status["context"] == "zlops perf" and status["state"] == "success"
    assert status["description"].startswith("neutral: 1 series not decided: gamma (suspect)")
    assert len(status["description"]) <= 140


def test_gitlab_status_and_one_merge_request_note_updated_on_a_rerun(
        forge: FakeForge, forge_config: Callable[..., Config]) -> None:
    config = forge_config()
    store = open_store(config)
    first = outcome(config, [row("alpha", Verdict.SEVERE, 1, 2, suite="glops")], suite="glops", key="pr:glops:1")
    assert post_outcome(config, store, first, secrets=secrets_for).status == "sent"
    (status,) = forge.state.gl_statuses
    assert status["state"] == "failed" and status["name"] == "zlops perf" and status["sha"] == HEAD
    (note,) = forge.state.notes[7]
    assert "zlops perf: failure" in note["body"] and "+100.00%" in note["body"]
    again = outcome(config, [row("alpha", Verdict.UNCHANGED, 1, 1, suite="glops")], suite="glops", key="pr:glops:2")
    assert post_outcome(config, store, again, secrets=secrets_for).status == "sent"
    assert len(forge.state.notes[7]) == 1 and "zlops perf: success" in forge.state.notes[7][0]["body"]
    assert len(forge.state.gl_statuses) == 1 and forge.state.gl_statuses[0]["state"] == "success"
    tokens = [{k.lower(): v for k, v in h.items()}.get("private-token") for _, _, h in forge.state.calls]
    assert tokens and set(tokens) == {GITLAB_TOKEN}


def test_a_forge_outage_keeps_the_check_in_the_outbox_until_a_flush_delivers_it(
        forge: FakeForge, forge_config: Callable[..., Config], caplog: pytest.LogCaptureFixture) -> None:
    config = forge_config()
    store = open_store(config)
    forge.state.fail_next = 1000                      # the forge answers 500 to everything
    with caplog.at_level(logging.DEBUG):
        result = post_outcome(config, store, outcome(config, [row("alpha", Verdict.SEVERE, 1, 2)]),
                              secrets=secrets_for)
        assert result.status == "failed" and "HTTP 500" in (result.error or "")
        (item,) = store.outbox_items(kinds=("forge-check",))
        assert item.status == "failed" and forge.state.check_runs == []
        report = flush_checks(store, config, secrets_for)   # still down: kept, the flush stops
        assert report.failed == [item.id] and report.stopped
        forge.state.fail_next = 0                           # the forge is back
        report = flush_checks(store, config, secrets_for)
    assert report.sent == [item.id]
    (run,) = forge.state.runs_on(HEAD)
    assert run["conclusion"] == "failure"
    assert store.outbox_items(kinds=("forge-check",)) == []
    assert GITHUB_TOKEN not in caplog.text and GITHUB_TOKEN not in str(store.outbox_items(
        kinds=("forge-check",), statuses=("sent",)))


def test_without_a_token_the_check_waits_and_slack_flushes_never_take_it(
        forge: FakeForge, forge_config: Callable[..., Config]) -> None:
    from zlops.forge.deliver import ForgeSecrets
    from zlops.slack.outbox import flush_outbox

    config = forge_config()
    store = open_store(config)
    result = post_outcome(config, store, outcome(config, [row("alpha", Verdict.UNCHANGED, 1, 1)]),
                          secrets=lambda f: ForgeSecrets())
    assert result.status == "written" and forge.state.calls == []
    assert flush_outbox(store, None).waiting == []       # not a Slack message
    assert flush_checks(store, config, secrets_for).sent == [result.notification_id]
