"""The issue's "done when", end to end: ``zlops forge serve`` started as docs/forge.md starts it (a real subprocess,
``import airflow`` failing in it), signed deliveries from a fake GitHub and GitLab on 127.0.0.1, the compares run
in the receiver's process on the deterministic fake upstream: a 2x slower op -> one check, failure; a docs-only
branch -> one check, success; a branch that cannot be fetched (the compare crashes) -> one finished check,
neutral with the reason; a replayed delivery runs nothing; GitLab's docs-only MR -> a success status and one note."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_forge import GITHUB_TOKEN, GITLAB_TOKEN, FakeForge, deliver, github_delivery, mr_note, pr_comment
from fake_upstream import Upstream, config_data
from serve_helpers import ServeProcess

pytestmark = pytest.mark.slow   # three PR compares with their worktree venvs: about a minute
MAIN = {"alpha": 1.0, "gamma": 1.0}
ENV = {"GH_TOKEN": GITHUB_TOKEN, "GH_HOOK": "s3cret-gh", "GL_TOKEN": GITLAB_TOKEN, "GL_HOOK": "s3cret-gl"}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    up = Upstream(tmp_path / "upstream")
    base = up.commit(MAIN, "main")
    heads = {}
    for branch, timings, docs in (("feature/slow-alpha", {"alpha": 2.0, "gamma": 1.0}, None),
                                  ("docs/readme", MAIN, "How to run the ops.\n")):
        up.branch(branch, base)
        up.checkout(branch)
        if docs:
            (up.path / "README.md").write_text(docs)
        heads[branch] = up.commit(timings, branch)
        up.checkout("main")
    forge = FakeForge()
    data = config_data(tmp_path / "home", up.path)
    suite = data["suites"]["fake"]  # type: ignore[index]
    data["suites"] = {
        "fake": {**suite, "forge": {"kind": "github", "api_url": forge.github_url, "repo": "acme/kernels",
                                    "token_env": "GH_TOKEN", "webhook_secret_env": "GH_HOOK"}},
        "fake-gl": {**suite, "forge": {"kind": "gitlab", "api_url": forge.gitlab_url, "repo": "acme/kernels",
                                       "token_env": "GL_TOKEN", "webhook_secret_env": "GL_HOOK"}}}
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(data))
    forge.state.permissions["alice"] = "write"
    forge.state.members[11] = 40
    pulls = {1: ("feature/slow-alpha", heads["feature/slow-alpha"]), 2: ("docs/readme", heads["docs/readme"]),
             3: ("feature/gone", "9" * 40)}   # a branch deleted upstream after the PR was opened: the fetch fails
    for number, (ref, sha) in pulls.items():
        forge.state.pulls[number] = {"number": number, "head": {"ref": ref, "sha": sha,
                                                                "repo": {"full_name": "acme/kernels"}},
                                     "base": {"repo": {"full_name": "acme/kernels"}}}
    server = ServeProcess(path, tmp_path, ENV)
    yield {"server": server, "forge": forge, "heads": heads}
    server.close()
    forge.close()


def _until(done: Callable[[], Any], what: str, server: ServeProcess, timeout: float = 400) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := done()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s:\n{server.log()[-6000:]}")
        time.sleep(0.5)
    return found


def _finished(forge: FakeForge, sha: str) -> Callable[[], list[dict[str, Any]]]:
    return lambda: [r for r in forge.state.runs_on(sha, "zlops") if r["status"] == "completed"]


def test_the_three_pr_outcomes_from_the_documented_receiver_without_airflow(world: dict[str, Any]) -> None:
    server, forge, heads = world["server"], world["forge"], world["heads"]
    assert "trigger local" in server.log().splitlines()[0]
    sent = {}
    for number in (1, 2, 3):
        body, headers = github_delivery("issue_comment", pr_comment(number, "/zlops compare fake", "alice"),
                                        "s3cret-gh")
        status, answer = deliver(server.url + "/github", body, headers, timeout=30)
        assert status == 202, answer
        sent[number] = (body, headers)
    (slow,) = _until(_finished(forge, heads["feature/slow-alpha"]), "the slow branch's conclusion", server)
    assert slow["conclusion"] == "failure", slow["output"]
    assert slow["output"]["title"].startswith("1 regression beyond regression: alpha +100.00% worse")
    (docs,) = _until(_finished(forge, heads["docs/readme"]), "the docs branch's conclusion", server)
    assert docs["conclusion"] == "success", docs["output"]
    (crashed,) = _until(_finished(forge, "9" * 40), "the crashed compare's check", server)
    assert crashed["conclusion"] == "neutral" and crashed["output"]["title"].startswith(
        "the compare did not finish: GitError: cannot fetch 'feature/gone'")
    # one check each; a replayed delivery runs nothing
    assert [len(forge.state.runs_on(sha, "zlops")) for sha in (*heads.values(), "9" * 40)] == [1, 1, 1]
    status, answer = deliver(server.url + "/github", *sent[1], timeout=30)
    assert status == 200 and "a replay runs nothing" in answer["message"]
    log = server.wait_for("state=finished", times=2)
    assert log.count("state=started") == 3 and "conclusion=failure" in log and "conclusion=success" in log
    assert "ModuleNotFoundError" not in log

    # GitLab: the docs-only merge request -> a success status and one MR note
    note = mr_note(2, "/zlops compare fake-gl", 11, "dev", branch="docs/readme", sha=heads["docs/readme"])
    headers = {"X-Gitlab-Event": "Note Hook", "X-Gitlab-Token": "s3cret-gl", "X-Gitlab-Event-UUID": "gl-1"}
    assert deliver(server.url + "/gitlab", note, headers, timeout=30)[0] == 202
    done = _until(lambda: [s for s in forge.state.gl_statuses if s["sha"] == heads["docs/readme"]
                           and s["state"] != "running"], "the GitLab status", server)
    assert done[0]["state"] == "success" and done[0]["description"].startswith("success")
    (posted,) = forge.state.notes[2]
    assert "### zlops: success" in posted["body"]
    assert deliver(server.url + "/gitlab", note, headers, timeout=30)[0] == 200   # replayed: nothing
