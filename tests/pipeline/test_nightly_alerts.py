"""Four nights through the CLI with Slack pointed at the fake Web API: threads, the outbox, an ack.

Real git upstream, real venv and benchmark processes, SQLite, real slack_sdk with the bot token from
the environment (the CLI's path). Night 2 regresses alpha and delta (two threads); delta is acked from
the CLI (a reply in its thread); night 3 keeps both slow, delta worse again (silenced by the ack), and
Slack answers its summary with a 500; night 4 fixes alpha: the outbox sends night 3's summary first,
then "fixed" in alpha's thread, then night 4's summary.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from fake_slack import CHANNEL_ID, TOKEN, FakeSlack, fake_slack_server
from fake_upstream import Upstream

from zlops.alerts.lifecycle import AlertState
from zlops.cli import main
from zlops.config.settings import Config
from zlops.slack.outbox import RETRY_COUNT
from zlops.steps.context import RunContext, open_store

pytestmark = pytest.mark.slow

BASE = {"alpha": 1.0, "beta": 2.0, "gamma": 3.0, "delta": 4.0}
TOKEN_ENV = "ZLOPS_TEST_SLACK_TOKEN"


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with fake_slack_server() as server:
        yield server


def _texts(post: dict) -> str:
    return post.get("text", "") + "\n" + "\n".join(b.get("text", {}).get("text", "") for b in post.get("blocks", []))


def test_threads_outbox_and_ack_over_four_nights(upstream: Upstream, make_config: Callable[..., Config],
                                                 fake: FakeSlack, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    shas = [upstream.commit(BASE, "n1"),
            upstream.commit({**BASE, "alpha": 1.3, "delta": 4.4}, "alpha and delta slower"),
            upstream.commit({**BASE, "alpha": 1.3, "delta": 5.0}, "delta slower still"),
            upstream.commit({**BASE, "delta": 5.0}, "alpha fixed")]
    config = make_config()
    data = config.model_dump(mode="json", exclude_none=True)
    data["slack"] = {"channel": "#perf-nightly", "base_url": fake.url, "token_env": TOKEN_ENV}
    cfg_path = tmp_path / "zlops.yaml"
    cfg_path.write_text(yaml.safe_dump(data), encoding="utf-8")

    def night(n: int) -> None:
        assert main(["--plain", "nightly", "--config", str(cfg_path), "--suite", "fake", "--sha", shas[n - 1],
                     "--run-id", f"n{n}"]) == 0

    night(1)
    # the summary (then, when the shard sampled telemetry twice, its timeline in the summary's thread)
    assert fake.methods()[0] == "chat.postMessage" and len(fake.posts()) == 1
    fake.seen.clear()

    # night 2: two regressions, two op families: two threads, each with its trend, then the summary
    night(2)
    store = open_store(config)
    alpha, delta = sorted(store.alerts(suite="fake"), key=lambda a: a.case)
    assert (alpha.case, delta.case) == ("alpha", "delta")
    assert alpha.state is delta.state is AlertState.CONFIRMED and alpha.thread_ts != delta.thread_ts
    roots = [p for p in fake.posts() if "New regression" in p["text"]]
    assert [("alpha" in p["text"], "delta" in p["text"]) for p in roots] == [(True, False), (False, True)]
    completes = fake.calls("files.completeUploadExternal")
    assert {c.args.get("thread_ts") for c in completes[:2]} == {alpha.thread_ts, delta.thread_ts}
    uploaded = [r.body for r in fake.calls("upload")]
    assert all(b[:8] == b"\x89PNG\r\n\x1a\n" and len(b) > 10_000 for b in uploaded)  # real figures
    (summary2,) = [p for p in fake.posts() if p["text"].startswith("fake @")]
    assert "<https://slack.example/files/" in _texts(summary2)  # regression lines link to their figures
    run_dir = RunContext(config, "fake", "nightly:fake:n2", shas[1]).run_dir
    html = (run_dir / "report.html").read_text()
    assert 'src="plots/local__alpha__time.png"' in html and "run__ratio.png" in html
    assert (run_dir / "plots" / "local__alpha__time.png").stat().st_size > 10_000

    # a person acks delta from the CLI: a reply in delta's thread, at once (the token is in the env)
    fake.seen.clear()
    assert main(["--plain", "alert", "ack", str(delta.id), "--note", "known: new tiling", "--by", "ana",
                 "--config", str(cfg_path)]) == 0
    (ack,) = fake.posts()
    assert ack["thread_ts"] == delta.thread_ts and ack["channel"] == CHANNEL_ID and "*acked* by ana" in _texts(ack)
    fake.seen.clear()

    # night 3: nothing new to announce (alpha still slow, delta worse but acked); Slack 500s the summary,
    # also both retries within the step
    monkeypatch.setattr("zlops.slack.outbox.SERVER_ERROR_BACKOFF_S", 0.05)
    fake.fail("chat.postMessage", 500, times=1 + RETRY_COUNT)
    night(3)  # the nightly still succeeds
    assert fake.methods() == ["chat.postMessage"] * (1 + RETRY_COUNT)
    assert [(i.kind, i.status) for i in store.outbox_items()] == [("summary", "failed"), ("summary-figures", "pending")]
    payload = json.loads((RunContext(config, "fake", "nightly:fake:n3", shas[2]).run_dir
                          / "slack_payload.json").read_text())
    assert payload["status"] == "failed" and "delta" in json.dumps(payload["payload"])
    assert [e["kind"] for e in store.alert_events(delta.id)] == ["opened", "state", "worsened"]
    fake.seen.clear()

    # night 4: alpha is back: night 3's summary goes first, then "fixed" in alpha's thread, then tonight's
    night(4)
    posts = fake.posts()
    assert [p["text"][:12] for p in posts] == ["fake @ " + shas[2][:5], "1 alert upda", "fake @ " + shas[3][:5]]
    assert posts[1]["thread_ts"] == alpha.thread_ts and "*fixed*" in _texts(posts[1])
    assert not any(p.get("thread_ts") == delta.thread_ts for p in posts)
    assert store.alert(alpha.id).state is AlertState.FIXED and store.alert(delta.id).state is AlertState.ACKED
    assert store.outbox_items() == []
    assert all(TOKEN not in r.getMessage() for r in caplog.records)
