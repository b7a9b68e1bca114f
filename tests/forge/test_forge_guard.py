"""What the receiver refuses before a delivery costs anything, and that every check it opens finishes: replays,
stale events, rate limits per PR and per commenter, one refusal per non-writer, a trigger that fails, a
compare that raises (the Airflow task's wrapper), a deadline passed (the outbox flush's sweep); each decision
one structured log line. The receiver under uvicorn, the fake forge on 127.0.0.1."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from fake_forge import AppServer, FakeForge, deliver, github_delivery, mr_note, pr_comment
from forge_helpers import GH_SECRET, GL_SECRET, HEAD, secrets_for

from zlops.config.settings import Config
from zlops.forge.guard import decision_line, event_time, parse_time, stale
from zlops.forge.lifecycle import AIRFLOW, finishing, flush, open_check
from zlops.forge.receiver import create_app
from zlops.steps.context import open_store
from zlops.store import forge as rows


class Triggers:
    """The receiver's trigger: records the confs; ``fail`` makes the next start raise."""

    def __init__(self) -> None:
        self.confs: list[dict[str, Any]] = []
        self.fail: Exception | None = None

    def __call__(self, conf: dict[str, Any], run_id: str) -> str:
        if self.fail is not None:
            raise self.fail
        self.confs.append(conf)
        return run_id


@pytest.fixture
def receiver(forge: FakeForge, forge_config: Callable[..., Config]) -> Iterator[tuple[str, Triggers, Config]]:
    config = forge_config(rate_per_pr=2, rate_per_user=2)
    forge.state.permissions.update({"alice": "write", "carol": "admin", "bob": "read"})
    for number in (5, 6, 7):
        forge.state.pulls[number] = {"number": number, "head": {"ref": "feature/x", "sha": HEAD,
                                                                "repo": {"full_name": "acme/kernels"}},
                                     "base": {"repo": {"full_name": "acme/kernels"}}}
    triggers = Triggers()
    server = AppServer(create_app(lambda: config, trigger=triggers, secrets=secrets_for))
    yield server.url, triggers, config
    server.close()


def gh(url: str, payload: dict[str, Any], event: str = "issue_comment") -> tuple[int, dict[str, Any]]:
    body, headers = github_delivery(event, payload, GH_SECRET)
    return deliver(url + "/github", body, headers)


def _writes(forge: FakeForge) -> list[tuple[str, str]]:
    return [(m, p) for m, p, _ in forge.state.calls if m in ("POST", "PATCH", "PUT")]


def test_a_comment_older_than_the_replay_window_runs_nothing(receiver: Any, forge: FakeForge) -> None:
    url, triggers, _ = receiver
    old = (datetime.now(timezone.utc) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status, answer = gh(url, pr_comment(5, "/zlops compare", "alice", created_at=old))
    assert status == 422 and answer["message"].startswith("refused: the event is from ")
    assert "older than the replay window of 1 day (forge.replay_window_s)" in answer["message"]
    assert triggers.confs == [] and forge.state.calls == []


def test_rate_limits_per_pr_and_per_commenter_write_nothing(receiver: Any, forge: FakeForge,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    url, triggers, _ = receiver
    caplog.set_level(logging.INFO, logger="zlops.forge")
    assert gh(url, pr_comment(5, "/zlops compare", "alice"))[0] == 202
    assert gh(url, pr_comment(5, "/zlops compare", "carol"))[0] == 202
    calls = len(forge.state.calls)
    status, answer = gh(url, pr_comment(5, "/zlops compare", "carol"))   # PR 5's third compare this hour
    assert status == 429 and answer["message"] == ("refused: acme/kernels#5 ran 2 compares in the last 1 hour "
                                                   "(forge.rate_per_pr: 2); try again later")
    assert len(forge.state.calls) == calls   # nothing asked of the forge, nothing written
    assert gh(url, pr_comment(6, "/zlops compare", "alice"))[0] == 202
    status, answer = gh(url, pr_comment(7, "/zlops compare", "alice"))   # alice's third request this hour
    assert status == 429 and answer["message"] == ("refused: alice asked zlops 2 times in the last 1 hour "
                                                   "(forge.rate_per_user: 2); try again later")
    assert len(triggers.confs) == 3
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("forge delivery ")]
    assert [ln.split("decision=")[1].split()[0] for ln in lines] == [
        "triggered", "triggered", "limited", "triggered", "limited"]
    assert "who=carol" in lines[2] and "pr=5" in lines[2] and "repo=acme/kernels" in lines[2]


def test_a_non_writer_gets_one_refusal_and_nothing_more(receiver: Any, forge: FakeForge) -> None:
    url, triggers, _ = receiver
    status, answer = gh(url, pr_comment(5, "/zlops compare", "bob"))
    assert status == 403 and answer["message"].startswith("refused: bob has read on acme/kernels")
    writes = _writes(forge)
    assert len(writes) == 1 and writes[0][1].endswith("/check-runs")     # the one refusal check
    status, answer = gh(url, pr_comment(5, "/zlops compare", "bob"))
    assert status == 403 and answer["message"].endswith("(said once on the pull request already)")
    assert gh(url, pr_comment(5, "/zlops compare please", "bob"))[0] == 422   # not the command: nothing either
    for _ in range(3):
        gh(url, pr_comment(5, "/zlops compare", "bob"))
    assert _writes(forge) == writes and triggers.confs == []
    (run,) = forge.state.runs_on(HEAD)
    assert run["name"] == "zlops perf / trigger"


def test_a_trigger_that_fails_closes_its_check_with_the_reason(receiver: Any, forge: FakeForge) -> None:
    url, triggers, config = receiver
    triggers.fail = RuntimeError("Airflow created no run of zlops_pr_compare")
    status, answer = gh(url, pr_comment(5, "/zlops compare", "alice"))
    assert status == 503 and answer["message"] == ("refused: the compare could not be started: RuntimeError: "
                                                   "Airflow created no run of zlops_pr_compare")
    (run,) = forge.state.runs_on(HEAD, "zlops perf")
    assert run["status"] == "completed" and run["conclusion"] == "neutral"
    assert run["output"]["title"] == ("the compare did not finish: the compare could not be started: RuntimeError: "
                                      "Airflow created no run of zlops_pr_compare")
    assert open_store(config).read(rows.checks) == []     # nothing left open


def test_a_compare_that_raises_in_the_airflow_task_closes_its_check(forge: FakeForge,
                                                                    forge_config: Callable[..., Config]) -> None:
    config = forge_config()
    store = open_store(config)
    gh_forge = config.suites["ops"].forge
    assert gh_forge is not None
    open_check(store, gh_forge, secrets_for, suite="ops", head_sha=HEAD, ref="feature/x", who="alice", pr=5,
               run_id="forge__abc", runner=AIRFLOW)
    assert forge.state.runs_on(HEAD)[0]["status"] == "in_progress"

    class AirflowTaskTimeout(BaseException):   # Airflow's own is a BaseException, so no `except Exception` eats it
        pass

    with pytest.raises(AirflowTaskTimeout), finishing(store, config, secrets_for, "forge__abc"):
        raise AirflowTaskTimeout("Timeout, PID: 4242")
    (run,) = forge.state.runs_on(HEAD)
    assert run["status"] == "completed" and run["conclusion"] == "neutral"
    assert run["output"]["title"] == "the compare did not finish: it timed out (Timeout, PID: 4242)"


def test_a_check_past_its_deadline_is_closed_by_the_next_flush_and_a_failed_close_is_posted_again(
        forge: FakeForge, forge_config: Callable[..., Config]) -> None:
    config = forge_config(compare_timeout_s=600)
    store = open_store(config)
    gl_forge = config.suites["glops"].forge
    assert gl_forge is not None
    then = datetime.now(timezone.utc) - timedelta(hours=1)
    open_check(store, gl_forge, secrets_for, suite="glops", head_sha=HEAD, ref="feature/x", who="dev", pr=3,
               run_id="forge__lost", runner=AIRFLOW, now=then)
    forge.state.fail_next = 1          # GitLab is down for the first close
    flush(store, config, secrets_for)
    assert forge.state.gl_statuses[-1]["state"] == "running"
    assert [c.state for c in store.read(rows.checks)] == ["closing"]
    flush(store, config, secrets_for)
    (status,) = forge.state.gl_statuses
    assert status["state"] == "success" and status["description"] == (
        "neutral: the compare did not finish: it did not conclude within 10 minutes (forge.compare_timeout_s)")
    assert "### zlops perf: neutral" in forge.state.notes[3][0]["body"]
    assert store.read(rows.checks) == []


def test_gitlab_replays_and_stale_notes_run_nothing(receiver: Any, forge: FakeForge) -> None:
    url, triggers, _ = receiver
    forge.state.members[11] = 30
    note = mr_note(3, "/zlops compare glops", 11, "dev", branch="feature/x", sha=HEAD)
    headers = {"X-Gitlab-Event": "Note Hook", "X-Gitlab-Token": GL_SECRET, "X-Gitlab-Event-UUID": "u-1"}
    assert deliver(url + "/gitlab", note, headers)[0] == 202
    status, answer = deliver(url + "/gitlab", note, {**headers, "X-Gitlab-Event-UUID": "u-2"})
    assert status == 200 and "a replay runs nothing" in answer["message"]
    old = mr_note(3, "/zlops compare glops", 11, "dev", branch="feature/x", sha=HEAD,
                  created_at="2026-01-02 03:04:05 UTC")
    status, answer = deliver(url + "/gitlab", old, {**headers, "X-Gitlab-Event-UUID": "u-3"})
    assert status == 422 and answer["message"].startswith("refused: the event is from 2026-01-02 03:04 UTC")
    assert len(triggers.confs) == 1


def test_the_pure_parts() -> None:
    assert parse_time("2026-12-06 05:00:00 UTC") == datetime(2026, 12, 6, 5, tzinfo=timezone.utc)
    assert parse_time("2026-12-06T05:00:00Z") == datetime(2026, 12, 6, 5, tzinfo=timezone.utc)
    assert parse_time("2026-12-06T06:00:00+01:00") == datetime(2026, 12, 6, 5, tzinfo=timezone.utc)
    assert parse_time("yesterday") is None and parse_time(None) is None
    assert event_time("github", "pull_request", {"pull_request": {"updated_at": "2026-12-06T05:00:00Z"}}) is not None
    now = datetime(2026, 12, 6, tzinfo=timezone.utc)
    assert stale(None, now, 60) is None and stale(now, now, 60) is None
    assert decision_line(delivery="d-1", who=None, outcome="a b", pr=5) == 'delivery=d-1 who=- outcome="a b" pr=5'
    assert decision_line(who="eve\nforge delivery decision=triggered") == \
        'who="eve\\nforge delivery decision=triggered"'
    assert decision_line(who="\x1b[2J") == 'who="\\u001b[2J"'


def test_a_store_that_does_not_answer_is_said_in_one_sentence(forge_config: Callable[..., Config],
                                                              caplog: pytest.LogCaptureFixture) -> None:
    from zlops.errors import DatabaseUnavailable
    from zlops.forge.webhook import Receiver

    def down(config: Config) -> Any:
        raise DatabaseUnavailable("cannot reach postgresql://zlops:***@db/zlops: connection refused")

    triggers = Triggers()
    receiver = Receiver(forge_config, trigger=triggers, secrets=secrets_for, store=down)
    body, headers = github_delivery("issue_comment", pr_comment(5, "/zlops compare", "alice"), GH_SECRET)
    with caplog.at_level(logging.INFO, logger="zlops.forge"):
        answer = receiver.handle("github", headers, body)
    assert answer.status == 503 and answer.message == (
        "refused: zlops cannot take deliveries now: cannot reach postgresql://zlops:***@db/zlops: connection refused")
    assert triggers.confs == [] and "decision=refused status=503" in caplog.text


def test_a_gitlab_label_triggers_once_and_its_replay_runs_nothing(receiver: Any, forge: FakeForge) -> None:
    url, triggers, _ = receiver
    forge.state.members[11] = 40
    hook = {"object_kind": "merge_request", "user": {"id": 11, "username": "dev"},
            "project": {"id": 7, "path_with_namespace": "acme/kernels"},
            "object_attributes": {"iid": 4, "source_branch": "feature/x", "source_project_id": 7,
                                  "target_project_id": 7, "last_commit": {"id": HEAD},
                                  "updated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")},
            "changes": {"labels": {"previous": [], "current": [{"title": "zlops-compare"}]}}}
    headers = {"X-Gitlab-Event": "Merge Request Hook", "X-Gitlab-Token": GL_SECRET}
    status, answer = deliver(url + "/gitlab", hook, headers)
    assert status == 202, answer
    assert triggers.confs == [{"suite": "glops", "ref": "feature/x", "pr": 4}]
    assert forge.state.gl_statuses[-1]["state"] == "running"
    assert deliver(url + "/gitlab", hook, headers)[0] == 200 and len(triggers.confs) == 1
