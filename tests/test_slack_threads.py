"""Alert threads, figures and the outbox through real slack_sdk against the fake Slack Web API on 127.0.0.1."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_slack import CHANNEL_ID, TOKEN, FakeSlack, fake_slack_server
from test_notify import _golden

from zlops.alerts.lifecycle import AlertState
from zlops.model import (
    BaselinePoint,
    CompareSummary,
    Comparison,
    Judgement,
    RunRecord,
    ShardOutcome,
    ShardStatus,
    Summary,
    Verdict,
)
from zlops.report.night_figures import RunFigures
from zlops.slack.announce import AnnounceResult, alert_digest, announce, announce_human_change, update_alerts
from zlops.slack.outbox import RETRY_COUNT, SlackSender, client_from_env, flush_outbox, with_retries
from zlops.store import Store

CHANNEL = "#perf-nightly"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(200)
SHARDS = [ShardOutcome("npu", 0, "cpu", ShardStatus.OK, Path("npu/0"), 0, None, None)]


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with fake_slack_server() as server:
        yield server


@pytest.fixture
def store(migrated_sqlite_url: str) -> Iterator[Store]:
    s = Store.open(migrated_sqlite_url)
    yield s
    s.dispose()


def _client(fake: FakeSlack, **kw: Any) -> Any:
    client = client_from_env(base_url=fake.url, environ={"SLACK_BOT_TOKEN": TOKEN}, **kw)
    assert client is not None
    return client


def _cmp(case: str, verdict: Verdict, base: float, head: float, base_sha: str) -> Comparison:
    change = (head - base) / base * 100
    return Comparison("ops", "npu", case, "time", "ms", True, BaselinePoint("x", base_sha, "ms", base, 1),
                      Summary(head, 1), Judgement(verdict, change, change, 2.0))


class Nights:
    """Runs the report step's Slack side for synthetic nights of one suite, one series per case."""

    def __init__(self, store: Store, tmp: Path) -> None:
        self.store, self.tmp, self.n = store, tmp, 0
        self.sha = "0" * 40
        self.last: list[Comparison] = []

    def night(self, client: Any, values: dict[str, tuple[Verdict, float, float]]) -> AnnounceResult:
        self.n += 1
        base_sha, self.sha = self.sha, f"{self.n}" * 40
        run = RunRecord(f"n{self.n}", "nightly", "ops", self.sha, "main")
        self.store.upsert_run(run)
        self.last = [_cmp(c, v, b, h, base_sha) for c, (v, b, h) in values.items()]
        return self.report(client, run, self.last)

    def report(self, client: Any, run: RunRecord, comparisons: list[Comparison]) -> AnnounceResult:
        run_dir = self.tmp / run.run_key
        (run_dir / "plots").mkdir(parents=True, exist_ok=True)
        trends = {}
        for c in comparisons:
            path = run_dir / "plots" / f"npu__{c.case}__time.png"
            path.write_bytes(PNG)
            trends[(c.pool, c.case, c.metric)] = path
        (run_dir / "plots" / "run__ratio.png").write_bytes(PNG)
        for name in ("report.md", "report.html"):
            (run_dir / name).write_text("report", encoding="utf-8")
        summary = CompareSummary(run.run_key, "ops", run.sha, tuple(comparisons))
        update_alerts(self.store, run=run, summary=summary, channel=CHANNEL, band_pct=2.0, trends=trends)
        digest, _ = alert_digest(self.store, run_key=run.run_key, suite="ops")
        return announce(self.store, run=run, summary=summary, shards=SHARDS, channel=CHANNEL, client=client,
                        run_dir=run_dir, figures=RunFigures(trends=trends, ratio=run_dir / "plots" / "run__ratio.png"),
                        digest=digest, report_files=(run_dir / "report.md", run_dir / "report.html"),
                        thresholds=(2.0, 5.0), judge="simple", expected_pools=None)

    def again(self, client: Any) -> AnnounceResult:
        """Re-run the last night's report step (an Airflow retry)."""
        run = self.store.get_run(f"n{self.n}")
        assert run is not None
        return self.report(client, run, self.last)


def _texts(post: dict[str, Any]) -> str:
    blocks = json.loads(post["blocks"]) if isinstance(post.get("blocks"), str) else post.get("blocks", [])
    return post.get("text", "") + "\n" + "\n".join(b.get("text", {}).get("text", "") for b in blocks)


def _no_token(caplog: pytest.LogCaptureFixture, store: Store) -> None:
    assert caplog.records
    assert all(TOKEN not in r.getMessage() for r in caplog.records)
    assert all(TOKEN not in (i.last_error or "") for i in store.outbox_items(statuses=("pending", "failed", "sent")))


STEADY = {"softmax_8192": (Verdict.UNCHANGED, 4.0, 4.01), "add_16M": (Verdict.UNCHANGED, 2.0, 2.0)}


def test_a_regression_gets_one_thread_and_its_fix_a_reply(fake: FakeSlack, store: Store, tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client, nights = _client(fake), Nights(store, tmp_path)
    nights.night(client, STEADY)
    assert fake.methods()[0] == "chat.postMessage"  # night 1: a summary, nothing to alert
    fake.seen.clear()

    # night 2: softmax regressed -> its thread (first message, then its figure), then the summary
    out = nights.night(client, {"softmax_8192": (Verdict.REGRESSION, 4.0, 4.4), "add_16M": (Verdict.UNCHANGED, 2, 2)})
    assert out.slack.status == "sent"
    upload = ["files.getUploadURLExternal", "upload", "files.completeUploadExternal"]
    assert fake.methods() == ["chat.postMessage", *upload, "chat.postMessage", *upload]
    root, summary = fake.posts()
    assert "thread_ts" not in root and root["channel"] == CHANNEL
    _golden("alert_root", root)
    complete = fake.calls("files.completeUploadExternal")[0].args
    (alert,) = store.alerts(suite="ops")
    root_ts = alert.thread_ts
    assert root_ts and (complete["channel_id"], complete["thread_ts"]) == (CHANNEL_ID, root_ts)
    assert fake.calls("upload")[0].body == PNG
    permalink = f"https://slack.example/files/{json.loads(complete['files'])[0]['id']}"
    assert f"<{permalink}|figure>" in _texts(summary) and "#1 new" in _texts(summary)
    assert (alert.state, alert.channel_id) == (AlertState.CONFIRMED, CHANNEL_ID)

    # the same report step again (an Airflow retry): no second alert, no second message
    fake.seen.clear()
    nights.again(client)
    assert fake.seen == [] and len(store.alerts(suite="ops")) == 1

    # night 3: still slow (UNCHANGED against the regressed night): only the summary, nothing in the thread
    nights.night(client, {"softmax_8192": (Verdict.UNCHANGED, 4.4, 4.41), "add_16M": (Verdict.UNCHANGED, 2, 2)})
    assert [p.get("thread_ts") for p in fake.posts()] == [None]
    assert "1 still open" in _texts(fake.posts()[0])
    fake.seen.clear()

    # night 4: back inside its band -> "fixed" in its own thread
    nights.night(client, {"softmax_8192": (Verdict.IMPROVED, 4.41, 4.02), "add_16M": (Verdict.UNCHANGED, 2, 2)})
    reply, summary4 = fake.posts()
    assert reply["thread_ts"] == root_ts and reply["channel"] == CHANNEL_ID
    assert "*fixed*" in _texts(reply) and "back within ±2%" in _texts(reply)
    _golden("alert_fixed_reply", {k: v for k, v in reply.items() if k != "thread_ts"})
    assert "thread_ts" not in summary4 and "#1 fixed" in _texts(summary4)
    assert store.alert(alert.id).state is AlertState.FIXED
    _no_token(caplog, store)


def test_5xx_past_the_retries_keeps_the_message_for_the_next_flush(fake: FakeSlack, store: Store, tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr("zlops.slack.outbox.SERVER_ERROR_BACKOFF_S", 0.01)
    client, nights = _client(fake), Nights(store, tmp_path)
    nights.night(client, STEADY)
    fake.seen.clear()
    fake.fail("chat.postMessage", 500, times=1 + RETRY_COUNT)
    out = nights.night(client, {"softmax_8192": (Verdict.SEVERE, 4.0, 5.0), "add_16M": (Verdict.UNCHANGED, 2, 2)})
    # the thread's first message got a 500, also on both retries: Slack looks down, nothing else is
    # tried, nothing raised
    assert fake.methods() == ["chat.postMessage"] * (1 + RETRY_COUNT)
    assert out.slack.status == "failed" and "not sent" in (out.slack.error or "")
    assert out.flush.stopped and "SlackApiError" in out.flush.stopped
    pending = store.outbox_items()
    assert [(i.kind, i.status, i.attempts) for i in pending] == [
        ("alert-1", "failed", 1), ("alert-1-figures", "pending", 0), ("summary", "pending", 0),
        ("summary-figures", "pending", 0)]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("zlops")]
    assert warnings and all(TOKEN not in r.getMessage() for r in warnings)
    fake.seen.clear()

    # night 3: the outbox goes first, oldest first, then tonight's summary
    nights.night(client, {"softmax_8192": (Verdict.UNCHANGED, 5.0, 5.0), "add_16M": (Verdict.UNCHANGED, 2, 2)})
    posts = fake.posts()
    assert [p["text"].split(":")[0] for p in posts] == ["New regression in ops", "ops @ 2222222", "ops @ 3333333"]
    (alert,) = store.alerts(suite="ops")
    assert alert.thread_ts and fake.calls("files.completeUploadExternal")[0].args["thread_ts"] == alert.thread_ts
    assert store.outbox_items() == []
    _no_token(caplog, store)


def test_429_is_retried_after_retry_after(fake: FakeSlack, store: Store, tmp_path: Path) -> None:
    client, nights = _client(fake), Nights(store, tmp_path)
    fake.fail("chat.postMessage", 429, headers={"Retry-After": "1"})
    out = nights.night(client, STEADY)
    first, second = fake.calls("chat.postMessage")[:2]
    assert second.at - first.at >= 1.0  # honoured
    assert out.slack.status == "sent" and store.outbox_items() == []


def test_429_past_its_retries_waits_for_the_next_run(fake: FakeSlack, store: Store, tmp_path: Path) -> None:
    client, nights = _client(fake, max_retries=1), Nights(store, tmp_path)
    fake.fail("chat.postMessage", 429, times=2, headers={"Retry-After": "0"})
    out = nights.night(client, STEADY)
    assert out.slack.status == "failed" and "ratelimited" in (out.slack.error or "")
    assert len(fake.calls("chat.postMessage")) == 2
    report = flush_outbox(store, client)
    assert report.failed == [] and len(report.sent) == 2 and store.outbox_items() == []


def test_slack_unreachable_never_raises(store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with fake_slack_server() as gone:
        url = gone.url
    client = client_from_env(base_url=url, environ={"SLACK_BOT_TOKEN": TOKEN}, max_retries=0, timeout=2)
    out = Nights(store, tmp_path).night(client, {"softmax_8192": (Verdict.REGRESSION, 4.0, 4.4)})
    assert out.slack.status == "failed" and "URLError" in (out.slack.error or "")
    assert json.loads(out.slack.path.read_text())["status"] == "failed"
    assert len(store.outbox_items()) == 4  # thread, its figure, summary, its figures: all kept
    _no_token(caplog, store)


def test_ack_posts_in_the_thread_and_silences_updates(fake: FakeSlack, store: Store, tmp_path: Path) -> None:
    client, nights = _client(fake), Nights(store, tmp_path)
    nights.night(client, {"softmax_8192": (Verdict.UNCHANGED, 4.0, 4.0), "gelu": (Verdict.UNCHANGED, 1.0, 1.0)})
    nights.night(client, {"softmax_8192": (Verdict.REGRESSION, 4.0, 4.4), "gelu": (Verdict.REGRESSION, 1.0, 1.1)})
    softmax, gelu = sorted(store.alerts(suite="ops"), key=lambda a: a.case, reverse=True)
    assert softmax.thread_ts != gelu.thread_ts  # two op families, two threads
    before, after, event = store.set_alert_state(softmax.id, AlertState.ACKED, note="bisecting", actor="ana")
    queued = announce_human_change(store, before, after, event, note="bisecting", actor="ana")
    fake.seen.clear()
    assert flush_outbox(store, client).sent == [queued]
    (ack,) = fake.posts()
    assert ack["thread_ts"] == softmax.thread_ts and "*acked* by ana" in _texts(ack) and "bisecting" in _texts(ack)
    fake.seen.clear()

    # both get worse again: the acked one silently, the other in its thread
    nights.night(client, {"softmax_8192": (Verdict.REGRESSION, 4.4, 5.5), "gelu": (Verdict.REGRESSION, 1.1, 1.4)})
    threaded = [p for p in fake.posts() if p.get("thread_ts")]
    assert [p["thread_ts"] for p in threaded] == [gelu.thread_ts] and "worse again" in _texts(threaded[0])
    assert [e["kind"] for e in store.alert_events(softmax.id)] == ["opened", "state", "worsened"]
    assert [e["announced"] for e in store.alert_events(softmax.id)] == [True, True, False]


def test_uploads_resolve_a_channel_name_once(fake: FakeSlack, store: Store, tmp_path: Path) -> None:
    store.upsert_run(RunRecord("n1", "nightly", "ops", "1" * 40, "main"))
    png = tmp_path / "x.png"
    png.write_bytes(PNG)
    for kind in ("a", "b"):
        store.queue_notification("n1", kind, CHANNEL, {"files": [{"path": str(png), "title": kind}]})
    store.queue_notification("n1", "c", "#nowhere", {"files": [{"path": str(png), "title": "c"}]})
    report = flush_outbox(store, _client(fake))
    assert len(report.sent) == 2 and len(report.failed) == 1 and report.stopped is None  # not an outage
    assert fake.methods().count("conversations.list") == 2  # once for #perf-nightly, once for #nowhere
    assert [c.args["channel_id"] for c in fake.calls("files.completeUploadExternal")] == [CHANNEL_ID, CHANNEL_ID]
    (left,) = store.outbox_items()
    assert "ChannelNotFound" in (left.last_error or "") and "configure its ID" in (left.last_error or "")


def test_messages_that_can_never_be_sent_are_abandoned(fake: FakeSlack, store: Store, tmp_path: Path) -> None:
    store.upsert_run(RunRecord("n1", "nightly", "ops", "1" * 40, "main"))
    root = store.queue_notification("n1", "gone", CHANNEL, {"files": [{"path": str(tmp_path / "deleted.png")}]})
    child = store.queue_notification("n1", "child", CHANNEL, {"text": "reply"}, parent_id=root)
    report = flush_outbox(store, _client(fake))
    assert report.abandoned == [root, child] and fake.seen == []
    old = store.queue_notification("n1", "old", CHANNEL, {"text": "last week"})
    sender = SlackSender(store, _client(fake), max_age=timedelta(days=7))
    (item,) = store.outbox_items(ids=[old])
    sender.now = item.created_at + timedelta(days=8)
    assert sender.flush().abandoned == [old] and fake.seen == []
    (stale,) = store.outbox_items(ids=[old])
    assert stale.status == "abandoned" and "stale" in (stale.last_error or "")


def test_a_client_without_rate_limit_retries_gets_them() -> None:
    from slack_sdk import WebClient

    client = WebClient(token=TOKEN)  # what SlackHook builds without retry_handlers
    assert {type(h).__name__ for h in with_retries(with_retries(client)).retry_handlers} == {
        "ConnectionErrorRetryHandler", "BoundedRateLimitRetry", "ServerErrorRetry"}
    assert len(client.retry_handlers) == 3


@pytest.mark.airflow
def test_the_slack_providers_hook_client_delivers_threads(fake: FakeSlack, store: Store, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """What the DAG's report task gets: SlackHook's client on slack_api_default (no 429 handler of its own)."""
    pytest.importorskip("airflow.providers.slack")
    from airflow.providers.slack.hooks.slack import SlackHook

    monkeypatch.setenv("AIRFLOW_CONN_SLACK_API_DEFAULT", json.dumps(
        {"conn_type": "slack", "password": TOKEN, "extra": {"base_url": fake.url, "timeout": 5}}))
    client = SlackHook(slack_conn_id="slack_api_default").client
    nights = Nights(store, tmp_path)
    nights.night(client, STEADY)
    fake.fail("chat.postMessage", 429, headers={"Retry-After": "0"})
    out = nights.night(client, {"softmax_8192": (Verdict.REGRESSION, 4.0, 4.4), "add_16M": (Verdict.UNCHANGED, 2, 2)})
    assert out.slack.status == "sent" and store.outbox_items() == []
    (alert,) = store.alerts(suite="ops")
    assert alert.thread_ts and fake.calls("files.completeUploadExternal")[-2].args["thread_ts"] == alert.thread_ts
    assert len(fake.calls("chat.postMessage")) == 4  # night 1's summary; the 429, its retry, night 2's summary
