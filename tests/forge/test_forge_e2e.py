"""The README path, end to end: a suite configured with a forge, a signed `/zlops compare` comment
posted to the receiver (uvicorn on 127.0.0.1), the PR compare it triggers (the `zlops compare` CLI on
the deterministic fake upstream, the nightly's noise judge), and the check on the PR's head commit in
the fake forge: (a) an op 2x slower -> failure, (b) a docs-only branch -> success (GitLab: status and
MR note), (c) a branch that only moves a bimodal series -> neutral, the series named; every table row
of the check is the row `zlops compare` printed."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_forge import GITHUB_TOKEN, GITLAB_TOKEN, AppServer, FakeForge, deliver, github_delivery, mr_note, pr_comment
from fake_upstream import Upstream, config_data

from zlops.cli import main
from zlops.config.settings import load_config
from zlops.forge.receiver import create_app
from zlops.model import CaseResult, RunRecord, RunStatus, ShardOutcome, ShardStatus
from zlops.steps.context import open_store
from zlops.store.points import pool_device_results

pytestmark = pytest.mark.slow
MAIN = {"alpha": 1.0, "gamma": 1.0}


def _seed_bimodal_nights(config: Any, suite: str, shas: list[str], tmp: Path) -> None:
    """Accepted nightly runs of ``suite`` on the main commits: gamma alternates between 1.0 and 1.08 ms
    (two process levels), alpha stays at 1.0 ms."""
    store = open_store(config)
    t0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
    for n, sha in enumerate(shas):
        when = t0 + timedelta(days=n)
        key = f"nightly:{suite}:n{n}"
        store.upsert_run(RunRecord(run_key=key, kind="nightly", suite=suite, sha=sha, branch="main",
                                   status=RunStatus.DONE, started_at=when, finished_at=when + timedelta(minutes=5),
                                   meta={}))
        g = 1.0 if n % 2 == 0 else 1.08
        results = [CaseResult(case, "time", "ms", True, tuple(v * (1 + 0.001 * (i % 3 - 1)) for i in range(5)))
                   for case, v in (("alpha", 1.0), ("gamma", g))]
        store.record_shard(key, ShardOutcome("local", 0, "cpu", ShardStatus.OK, tmp / "art", 0, when,
                                             when + timedelta(minutes=5)), results)
        store.save_series_points(key, pool_device_results([("local", 0, r) for r in results]))
        store.set_accepted(key)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    up = Upstream(tmp_path / "upstream")
    shas = []
    for i in range(8):
        (up.path / "NOTES.md").write_text(f"night {i}\n")
        shas.append(up.commit(MAIN, f"main {i}"))
    heads = {}
    for branch, timings, docs in (("feature/slow-alpha", {"alpha": 2.0, "gamma": 1.0}, None),
                                  ("docs/readme", MAIN, "How to run the ops.\n"),
                                  ("feature/gamma-tiles", {"alpha": 1.0, "gamma": 1.04}, None)):
        up.branch(branch, shas[-1])
        up.checkout(branch)
        if docs:
            (up.path / "README.md").write_text(docs)
        heads[branch] = up.commit(timings, branch)
        up.checkout("main")
    forge = FakeForge()
    data = config_data(tmp_path / "home", up.path)
    data["judge"] = "noise"   # the nightly's judging: noise model, A/B confirmation by interleaved pairs
    suite = data["suites"]["fake"]  # type: ignore[index]
    gh = {"kind": "github", "api_url": forge.github_url, "repo": "acme/kernels", "token_env": "GH_TOKEN",
          "webhook_secret_env": "GH_HOOK_SECRET", "links_url": "https://airflow.example.com/zlops"}
    data["suites"] = {"fake": {**suite, "forge": gh},
                      "fake-bimodal": {**suite, "forge": gh},
                      "fake-gl": {**suite, "forge": {"kind": "gitlab", "api_url": forge.gitlab_url,
                                                     "repo": "acme/kernels", "token_env": "GL_TOKEN",
                                                     "webhook_secret_env": "GL_HOOK_SECRET"}}}
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(data))
    config = load_config(path)
    _seed_bimodal_nights(config, "fake-bimodal", shas, tmp_path)
    for name, value in (("GH_TOKEN", GITHUB_TOKEN), ("GL_TOKEN", GITLAB_TOKEN), ("GH_HOOK_SECRET", "s3cret-gh"),
                        ("GL_HOOK_SECRET", "s3cret-gl")):
        monkeypatch.setenv(name, value)
    forge.state.permissions["alice"] = "write"
    forge.state.members[11] = 40
    for number, branch in enumerate(heads, start=1):
        forge.state.pulls[number] = {"number": number, "head": {"ref": branch, "sha": heads[branch],
                                                                "repo": {"full_name": "acme/kernels"}},
                                     "base": {"repo": {"full_name": "acme/kernels"}}}
    printed: dict[str, str] = {}

    def trigger(conf: dict[str, Any], run_id: str) -> str:
        """What the DAG does, through `zlops compare` itself: its printed report is kept to compare."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["compare", "--config", str(path), "--suite", conf["suite"], "--ref", conf["ref"],
                         "--pr", str(conf["pr"])])
        printed[conf["ref"]] = out.getvalue()
        assert code == 0, out.getvalue()
        return run_id

    server = AppServer(create_app(lambda: load_config(path), trigger=trigger))
    yield {"url": server.url, "forge": forge, "heads": heads, "printed": printed}
    server.close()
    forge.close()


def _rows(text: str) -> dict[str, list[str]]:
    return {ln.split()[0]: ln.split() for ln in text.splitlines()
            if ln.split() and ln.split()[0] in ("alpha", "gamma")}


def _check(world: dict[str, Any], number: int, suite: str) -> dict[str, Any]:
    body, headers = github_delivery("issue_comment", pr_comment(number, f"/zlops compare {suite}", "alice"),
                                    "s3cret-gh")
    status, answer = deliver(world["url"] + "/github", body, headers)
    assert status == 202, answer
    sha = answer["triggered"][0]["head_sha"]
    (run,) = world["forge"].state.runs_on(sha)
    assert run["status"] == "completed" and run["external_id"] == f"zlops:{suite}"
    return run


def test_the_check_on_the_pr_gives_the_nightlys_verdict_with_the_figures_zlops_compare_prints(
        world: dict[str, Any]) -> None:
    forge, printed = world["forge"], world["printed"]
    # (a) alpha twice as slow: confirmed by the compare's interleaved pairs -> failure
    run = _check(world, 1, "fake")
    assert run["head_sha"] == world["heads"]["feature/slow-alpha"]
    assert run["conclusion"] == "failure", run["output"]
    summary = run["output"]["summary"]
    shown, cli = _rows(summary), _rows(printed["feature/slow-alpha"])
    assert list(shown) == ["alpha"] and shown["alpha"] == cli["alpha"] and "+100.00%" in shown["alpha"]
    assert run["output"]["title"].startswith("1 regression beyond regression: alpha +100.00%")
    overall = next(ln for ln in printed["feature/slow-alpha"].splitlines() if ln.startswith("Overall:"))
    assert overall in summary and "(1 unchanged example not shown)" in summary
    # the Args line says the pairs the A/B ran, as its figures do (the compare added pairs to confirm alpha)
    ran = re.search(r"A/B (\d+)\+\1: \+100\.00% worse", summary)
    assert ran is not None, summary
    assert f"pairs {ran.group(1)} run (1 asked), judge noise" in summary
    # (b) docs only -> success, nothing listed
    run = _check(world, 2, "fake")
    assert run["conclusion"] == "success", run["output"]
    assert _rows(run["output"]["summary"]) == {} and "no regression in 2 series" == run["output"]["title"]
    # (c) only the bimodal series moves, within its levels -> neutral, gamma named, its figures as printed
    run = _check(world, 3, "fake-bimodal")
    assert run["conclusion"] == "neutral", run["output"]
    assert run["output"]["title"] == "1 series not decided: gamma (unmeasurable)"
    shown, cli = _rows(run["output"]["summary"]), _rows(printed["feature/gamma-tiles"])
    assert list(shown) == ["gamma"] and shown["gamma"] == cli["gamma"]
    assert "bimodal" in run["output"]["summary"] and "case=gamma" in run["output"]["summary"]
    # a re-run of (a) updates its check: still one check run on that commit
    _check(world, 1, "fake")
    assert len(forge.state.runs_on(world["heads"]["feature/slow-alpha"])) == 1
    # a forged comment is refused and triggers nothing
    body, headers = github_delivery("issue_comment", pr_comment(2, "/zlops compare fake", "alice"), "guessed")
    assert deliver(world["url"] + "/github", body, headers)[0] == 401


def test_gitlab_docs_only_merge_request_gets_a_success_status_and_note(world: dict[str, Any]) -> None:
    head = world["heads"]["docs/readme"]
    note = mr_note(2, "/zlops compare fake-gl", 11, "dev", branch="docs/readme", sha=head)
    status, answer = deliver(world["url"] + "/gitlab", note, {"X-Gitlab-Event": "Note Hook",
                                                              "X-Gitlab-Token": "s3cret-gl"})
    assert status == 202, answer
    (state,) = [s for s in world["forge"].state.gl_statuses if s["sha"] == head]
    assert state["state"] == "success" and state["name"] == "zlops"
    (posted,) = world["forge"].state.notes[2]
    assert "### zlops: success" in posted["body"] and "Overall: 0 of 2 examples improved, 0 regressed" in posted["body"]
