"""The webhook receiver served by uvicorn on 127.0.0.1, with real signed deliveries and the fake forge
(tests/fake_forge.py) answering who may write: triggers with validated params, refusals in one sentence."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_forge import AppServer, FakeForge, deliver, github_delivery, mr_note, pr_comment
from forge_helpers import GH_SECRET, GL_SECRET, HEAD, secrets_for

from zlops.config.settings import Config
from zlops.forge.receiver import create_app


@pytest.fixture
def receiver(forge: FakeForge, forge_config: Callable[..., Config]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    config = forge_config()
    forge.state.permissions.update({"alice": "write", "mona": "maintain", "bob": "read"})
    forge.state.members.update({11: 30, 12: 20})
    forge.state.pulls[5] = {"number": 5, "head": {"ref": "feature/faster-softmax", "sha": HEAD,
                                                  "repo": {"full_name": "acme/kernels"}},
                            "base": {"repo": {"full_name": "acme/kernels"}}}
    forge.state.pulls[6] = {"number": 6, "head": {"ref": "main", "sha": HEAD, "repo": {"full_name": "eve/kernels"}},
                            "base": {"repo": {"full_name": "acme/kernels"}}}
    forge.state.pulls[8] = {"number": 8, "head": {"ref": "x;rm -rf /", "sha": HEAD,
                                                  "repo": {"full_name": "acme/kernels"}},
                            "base": {"repo": {"full_name": "acme/kernels"}}}
    triggered: list[dict[str, Any]] = []

    def trigger(conf: dict[str, Any], run_id: str) -> str:
        triggered.append(conf)
        return run_id

    server = AppServer(create_app(lambda: config, trigger=trigger, secrets=secrets_for))
    yield server.url, triggered
    server.close()


def gh(url: str, payload: dict[str, Any], secret: str | None = GH_SECRET, event: str = "issue_comment"
       ) -> tuple[int, dict[str, Any]]:
    body, headers = github_delivery(event, payload, secret)
    return deliver(url + "/github", body, headers)


def test_a_writer_comment_triggers_the_compare_with_validated_params(receiver: Any, forge: FakeForge) -> None:
    url, triggered = receiver
    status, answer = gh(url, pr_comment(5, "/zlops compare", "alice"))
    assert status == 202, answer
    assert triggered == [{"suite": "ops", "ref": "feature/faster-softmax", "pr": 5}]
    assert answer["message"] == "triggered zlops_pr_compare for ops on feature/faster-softmax (alice has write)"
    (run,) = forge.state.runs_on(HEAD)   # "running" until the compare posts its conclusion
    assert run["status"] == "in_progress" and "requested by alice" in run["output"]["title"]
    # maintain is a writer too; a fork's PR is compared as pull/N/head
    assert gh(url, pr_comment(6, "/zlops compare ops", "mona"))[0] == 202
    assert triggered[-1] == {"suite": "ops", "ref": "pull/6/head", "pr": 6}


@pytest.mark.parametrize(("secret", "why"), [("not-the-secret", "does not match a configured webhook secret"),
                                             (None, "is missing")])
def test_a_forged_or_unsigned_delivery_is_refused_in_one_sentence(receiver: Any, forge: FakeForge,
                                                                   secret: str | None, why: str) -> None:
    url, triggered = receiver
    status, answer = gh(url, pr_comment(5, "/zlops compare", "alice"), secret=secret)
    assert status == 401 and answer["message"] == f"refused: the X-Hub-Signature-256 header {why}"
    assert triggered == [] and forge.state.calls == []    # nothing asked, nothing triggered


def test_a_body_changed_after_signing_is_refused(receiver: Any) -> None:
    url, triggered = receiver
    body, headers = github_delivery("issue_comment", pr_comment(5, "/zlops compare", "bob"), GH_SECRET)
    forged = body.replace(b'"bob"', b'"alice"')
    assert deliver(url + "/github", forged, headers)[0] == 401 and triggered == []


def test_a_reader_is_refused_and_the_check_says_so(receiver: Any, forge: FakeForge) -> None:
    url, triggered = receiver
    status, answer = gh(url, pr_comment(5, "/zlops compare", "bob"))
    assert status == 403 and triggered == []
    sentence = "refused: bob has read on acme/kernels; only users with write access can trigger zlops (/zlops compare)"
    assert answer["message"] == sentence
    (run,) = forge.state.runs_on(HEAD)
    assert run["name"] == "zlops perf / trigger" and run["conclusion"] == "neutral"
    assert run["output"]["title"] == sentence
    assert gh(url, pr_comment(5, "/zlops compare", "stranger"))[0] == 403   # not a collaborator at all


@pytest.mark.parametrize(("payload", "status", "message"), [
    (pr_comment(5, "looks good to me", "alice"), 202, "ignored: the comment does not start with /zlops"),
    (pr_comment(5, "/zlops deploy", "alice"), 422,
     ("refused: unknown command; write /zlops compare, or /zlops compare <suite>")),
    (pr_comment(5, "/zlops compare nightly-x", "alice"), 422,
     ("refused: suite 'nightly-x' is not configured for acme/kernels; write /zlops compare <suite> with one of ops")),
    (pr_comment(5, "/zlops compare", "alice", repo="other/repo"), 422,
     "refused: no suite's forge section names the repository other/repo"),
    ({**pr_comment(5, "/zlops compare", "alice"), "issue": {"number": 5}}, 202,
     "ignored: the comment is on an issue, not a pull request"),
])
def test_anything_else_is_answered_in_one_sentence(receiver: Any, payload: dict[str, Any], status: int,
                                                  message: str) -> None:
    url, triggered = receiver
    assert gh(url, payload) == (status, {"message": message, "triggered": []})
    assert triggered == []


def test_an_unsafe_branch_name_never_reaches_the_trigger(receiver: Any) -> None:
    url, triggered = receiver
    status, answer = gh(url, pr_comment(8, "/zlops compare", "alice"))
    assert status == 422 and answer["message"].startswith("refused: ref: 'x;rm -rf /' is not a branch name")
    assert triggered == []


def test_a_label_triggers_the_compare(receiver: Any) -> None:
    url, triggered = receiver
    payload = {"action": "labeled", "label": {"name": "zlops-compare"}, "sender": {"login": "alice"},
               "repository": {"full_name": "acme/kernels"},
               "pull_request": {"number": 5, "head": {"ref": "feature/faster-softmax", "sha": HEAD,
                                                      "repo": {"full_name": "acme/kernels"}}}}
    assert gh(url, payload, event="pull_request")[0] == 202
    assert triggered == [{"suite": "ops", "ref": "feature/faster-softmax", "pr": 5}]
    other = {**payload, "label": {"name": "bug"}}
    assert gh(url, other, event="pull_request") == (202, {"message": "ignored: label bug is no suite's trigger_label",
                                                         "triggered": []})


def test_gitlab_note_token_and_member_level(receiver: Any, forge: FakeForge) -> None:
    url, triggered = receiver
    note = mr_note(3, "/zlops compare glops", 11, "dev", branch="feature/faster-softmax", sha=HEAD)
    headers = {"X-Gitlab-Event": "Note Hook", "X-Gitlab-Token": GL_SECRET}
    status, answer = deliver(url + "/gitlab", note, headers)
    assert status == 202, answer
    assert triggered == [{"suite": "glops", "ref": "feature/faster-softmax", "pr": 3}]
    assert forge.state.gl_statuses[0]["state"] == "running"
    assert deliver(url + "/gitlab", note, {**headers, "X-Gitlab-Token": "guess"})[0] == 401
    reporter = mr_note(3, "/zlops compare glops", 12, "rep", branch="feature/faster-softmax", sha=HEAD)
    status, answer = deliver(url + "/gitlab", reporter, headers)
    assert status == 403 and answer["message"].startswith("refused: rep has access level 20")
    assert forge.state.gl_statuses[-1]["name"] == "zlops perf / trigger"
    assert len(triggered) == 1


def test_the_answer_never_shows_the_token(receiver: Any, forge: FakeForge) -> None:
    from fake_forge import GITHUB_TOKEN

    url, _ = receiver
    forge.state.fail_next = 10
    status, answer = gh(url, pr_comment(5, "/zlops compare", "alice"))
    assert status == 502 and "HTTP 500" in answer["message"] and GITHUB_TOKEN not in json.dumps(answer)
