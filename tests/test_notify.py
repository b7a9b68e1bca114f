"""The Slack summary: a pure payload, then real slack_sdk posts against a fake Web API on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from fake_slack import FakeSlack, fake_slack_server

from zlops.model import (
    BaselinePoint,
    CompareSummary,
    Comparison,
    Judgement,
    RunRecord,
    RunStatus,
    ShardOutcome,
    ShardStatus,
    Summary,
    Verdict,
)
from zlops.slack.notify import NotifyResult
from zlops.slack.outbox import RETRY_COUNT, client_from_env, send_message
from zlops.slack.summary import (
    MAX_BLOCKS,
    MAX_SECTION_CHARS,
    AlertDigest,
    slack_summary_messages,
    slack_summary_payload,
)
from zlops.store import Store

TOKEN = "xoxb-test-0123456789-secret"
SHA = "2222222bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
T0 = datetime(2025, 3, 1, 2, 0, tzinfo=timezone.utc)


def _cmp(pool: str, case: str, verdict: Verdict, base: float | None, head: float | None,
         unit: str = "us") -> Comparison:
    change = None if base is None or head is None else (head - base) / base * 100
    return Comparison(
        suite="kernels", pool=pool, case=case, metric="latency", unit=unit, lower_is_better=True,
        base=None if base is None else BaselinePoint("n1", "1" * 40, unit, base, 1),
        head=None if head is None else Summary(head, 1),
        judgement=Judgement(verdict, change, change, None),
    )


def _summary(*comparisons: Comparison) -> CompareSummary:
    return CompareSummary("nightly-0302", "kernels", SHA, comparisons)


SUMMARY = _summary(
    _cmp("npu", "matmul_bf16", Verdict.REGRESSION, 1240.0, 1607.8),
    _cmp("npu", "add<fp32>", Verdict.IMPROVED, 890.3, 850.0),
    _cmp("cuda", "gemm", Verdict.POTENTIAL, 12.5, 12.85, unit="ms"),
    _cmp("cuda", "softmax", Verdict.UNCHANGED, 4.0, 4.01, unit="ms"),
    _cmp("cuda", "attention", Verdict.MISSING, 7.0, None, unit="ms"),
    _cmp("cuda", "conv2d", Verdict.NEW, None, 3.25, unit="ms"),
)
RUN = RunRecord(run_key="nightly-0302", kind="nightly", suite="kernels", sha=SHA, branch="main",
                status=RunStatus.DONE)
SHARDS = [
    ShardOutcome("npu", 0, "ascend", ShardStatus.OK, Path("a/npu-0"), 0, T0, T0),
    ShardOutcome("cuda", 1, "cuda", ShardStatus.TIMEOUT, Path("a/cuda-1"), None, T0, T0,
                 error="killed after 3600 s\nmore"),
]


def _texts(payload: dict[str, Any]) -> list[str]:
    out = []
    for b in payload["blocks"]:
        if "text" in b:
            out.append(b["text"]["text"])
        out += [e["text"] for e in b.get("elements", [])]
    return out


GOLDEN = Path(__file__).parent / "data" / "slack"


def _golden(name: str, payload: Any) -> None:
    """Compare with tests/data/slack/<name>.json; ZLOPS_UPDATE_GOLDEN=1 rewrites it (review the diff)."""
    path = GOLDEN / f"{name}.json"
    text = json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    if os.environ.get("ZLOPS_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{path} differs; ZLOPS_UPDATE_GOLDEN=1 to accept"


FIGURES = {("npu", "matmul_bf16", "latency"): "https://slack.example/files/F0001",
           ("cuda", "gemm", "latency"): "plots/cuda__gemm__latency.png"}
DIGEST = AlertDigest(marks={("npu", "matmul_bf16", "latency"): "#7 new"},
                     lines=[":red_circle: #7 `matmul_bf16` (npu, latency) +29.66%: new regression (thread opened)"],
                     counts={"new": 1}, still_open=2)


def test_payload_shape_and_order() -> None:
    messages = slack_summary_messages(SUMMARY, run=RUN, shards=SHARDS, channel="C0PERF",
                                      report_path="https://ci.example/r/nightly-0302/report.md",
                                      figures=FIGURES, alerts=DIGEST, expected_pools=["cuda", "npu", "musa"])
    payload = messages.main
    assert messages.thread == () and not messages.overflowed
    assert payload["channel"] == "C0PERF"
    assert payload["text"] == ("kernels @ 2222222: 0 severe, 1 regressions, 1 potential, 1 improved, 1 missing "
                               "of 4 judged; shards 1 ok, 1 failed")
    assert payload["blocks"][0] == {"type": "header",
                                    "text": {"type": "plain_text", "text": "kernels nightly · 1111111..2222222"}}
    texts = _texts(payload)
    assert texts[1] == ("Run `nightly-0302` on `main` · pools: 1 run, 1 invalid (cuda), 1 missing (musa) · "
                        "shards: 1 ok, 1 failed")
    assert texts[2].startswith("*Overall: 1 of 4 cases improved, 2 regressed*\n:red_circle: 1 regressions (>5%)")
    assert texts[3].startswith(":bell: *Alerts*: 1 new · 2 still open (not announced again")
    assert texts[4] == (":red_circle: *Regressions* (worse by more than 5%)\n"
                        "• *npu* · `matmul` · `1111111..2222222`: 1 series worse by 29.7% · alerts: #7 new\n"
                        "    ◦ `matmul_bf16` (latency): *+29.66%*  1240 us → 1608 us · alert #7 new"
                        " · <https://slack.example/files/F0001|figure>")
    assert texts[5].endswith("◦ `gemm` (latency): *+2.80%*  12.5 ms → 12.85 ms · figure "
                             "`plots/cuda__gemm__latency.png`")
    assert texts[6].endswith("◦ `add&lt;fp32&gt;` (latency): *-4.53%*  890.3 us → 850 us")
    assert texts[7] == ":x: *Failures*\n• cuda device 1 (cuda): timeout: killed after 3600 s"
    assert texts[8].endswith("• *cuda* · `attention`: 1 missing: `attention` (latency)")
    assert texts[9] == "Full report: https://ci.example/r/nightly-0302/report.md"
    assert slack_summary_payload(SUMMARY, run=RUN, shards=SHARDS, channel="C0PERF",
                                 report_path="https://ci.example/r/nightly-0302/report.md", figures=FIGURES,
                                 alerts=DIGEST, expected_pools=["cuda", "npu", "musa"]) == payload
    _golden("summary", payload)


def test_groups_by_commit_range_family_and_pool() -> None:
    rows = [_cmp("npu", f"softmax/float16/({n}x64)", Verdict.REGRESSION, 100.0, 100.0 + n) for n in (6, 9, 7, 12)]
    rows += [_cmp("cuda", "softmax_8192", Verdict.REGRESSION, 100.0, 108.0),
             _cmp("npu", "layer_norm_8192", Verdict.REGRESSION, 100.0, 107.0)]
    messages = slack_summary_messages(_summary(*rows), run=RUN, shards=[], channel="C0PERF")
    regressions = next(t for t in _texts(messages.main) if "*Regressions*" in t).splitlines()
    heads = [line for line in regressions if line.startswith("• ")]
    assert heads == ["• *npu* · `softmax` · `1111111..2222222`: 4 series worse by 6.0–12.0%",
                     "• *cuda* · `softmax` · `1111111..2222222`: 1 series worse by 8.0%",
                     "• *npu* · `layer_norm` · `1111111..2222222`: 1 series worse by 7.0%"]
    # the worst three of the big group in the message, all four in the thread
    assert [line.split("`")[1] for line in regressions[2:5]] == [
        "softmax/float16/(12x64)", "softmax/float16/(9x64)", "softmax/float16/(7x64)"]
    assert regressions[5].strip() == "… and 1 more in the thread"
    assert messages.overflowed and len(messages.thread) == 1
    every = _texts(messages.thread[0])[0]
    assert every.count("◦ `softmax/float16/") == 4 and "layer_norm" not in every
    assert "every series of the larger groups; the full report is attached there" in _texts(messages.main)[-1]
    _golden("summary_thread", messages.thread[0])


def test_never_truncated_silently_past_the_block_limit() -> None:
    many = _summary(*(_cmp(f"pool{i % 70:02d}", f"op{i:03d}_" + "x" * 150, Verdict.REGRESSION, 100.0, 120.0)
                      for i in range(400)))
    messages = slack_summary_messages(many, run=RUN, shards=[], channel="C0PERF")
    assert len(messages.main["blocks"]) == MAX_BLOCKS
    assert all(len(t) <= MAX_SECTION_CHARS for t in _texts(messages.main))
    assert messages.overflowed and all(len(m["blocks"]) <= MAX_BLOCKS for m in messages.thread)
    everything = "\n".join(t for m in (messages.main, *messages.thread) for t in _texts(m))
    assert all(f"`op{i:03d}_" in everything for i in range(400))  # every series somewhere, none dropped
    assert "more sections" in _texts(messages.main)[-1]
    n = len(messages.thread)
    assert _texts(messages.thread[-1])[-1] == f"summary continued, part {n} of {n}"


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    with fake_slack_server() as fake:
        yield fake


def _client(fake: Any) -> Any:
    client = client_from_env(base_url=fake.url, environ={"SLACK_BOT_TOKEN": TOKEN})
    assert client is not None
    return client


@pytest.fixture
def store(migrated_sqlite_url: str) -> Iterator[Store]:
    s = Store.open(migrated_sqlite_url)
    s.upsert_run(RUN)
    yield s
    s.dispose()


def _send(payload: dict[str, Any], client: Any, *, fallback_dir: Path, store: Store) -> NotifyResult:
    """One message through the gateway, as the PR compare sends its report."""
    return send_message(store, client, run_key=RUN.run_key, kind="pr-compare", channel=str(payload["channel"]),
                        payload=payload, fallback_dir=fallback_dir)


def _no_token_anywhere(caplog: pytest.LogCaptureFixture, result: NotifyResult) -> None:
    assert caplog.records, "expected some log records"
    for record in caplog.records:
        assert TOKEN not in record.getMessage()
    assert TOKEN not in repr(result) and TOKEN not in str(result)
    if result.path is not None:
        assert TOKEN not in result.path.read_text()


def test_post_sends_the_payload(fake_slack: FakeSlack, tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                store: Store) -> None:
    caplog.set_level(logging.DEBUG)
    payload = slack_summary_payload(SUMMARY, run=RUN, shards=SHARDS, channel="C0PERF")
    result = _send(payload, _client(fake_slack), fallback_dir=tmp_path / "out", store=store)

    assert result == NotifyResult(status="sent", path=tmp_path / "out" / "slack_payload.json",
                                  ts="1700000000.000001")
    [request] = fake_slack.seen
    assert request.path == "/api/chat.postMessage"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    sent = json.loads(request.body)
    assert sent == {"channel": "C0PERF", "text": payload["text"], "blocks": payload["blocks"]}
    record = json.loads(result.path.read_text())
    assert record["status"] == "sent" and record["ts"] == "1700000000.000001"
    assert record["payload"] == payload and record["schema_version"] == 1
    (item,) = store.outbox_items(statuses=("sent",))  # it went through the outbox
    assert item.kind == "pr-compare" and item.ts == result.ts
    _no_token_anywhere(caplog, result)


def test_one_server_error_is_retried_within_the_call(fake_slack: Any, tmp_path: Path, store: Store,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("zlops.slack.outbox.SERVER_ERROR_BACKOFF_S", 0.2)
    fake_slack.fail("chat.postMessage", 502)
    result = _send({"channel": "C0PERF", "text": "x"}, _client(fake_slack), fallback_dir=tmp_path, store=store)
    assert result.status == "sent"
    first, second = fake_slack.calls("chat.postMessage")
    assert second.at - first.at >= 0.2  # backed off
    assert store.outbox_items() == []


def test_server_errors_past_the_retries_fail_without_raising(fake_slack: Any, tmp_path: Path, store: Store,
                                                             caplog: pytest.LogCaptureFixture,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr("zlops.slack.outbox.SERVER_ERROR_BACKOFF_S", 0.01)
    fake_slack.fail("chat.postMessage", 500, times=1 + RETRY_COUNT)
    payload = slack_summary_payload(SUMMARY, run=RUN, shards=SHARDS, channel="C0PERF")
    result = _send(payload, _client(fake_slack), fallback_dir=tmp_path, store=store)

    assert result.status == "failed" and result.ts is None
    assert result.error and "SlackApiError" in result.error
    assert len(fake_slack.calls("chat.postMessage")) == 1 + RETRY_COUNT
    record = json.loads((tmp_path / "slack_payload.json").read_text())
    assert record["status"] == "failed" and record["error"] == result.error
    assert record["payload"] == payload
    (kept,) = store.outbox_items()  # kept for the next flush
    assert kept.status == "failed" and kept.kind == "pr-compare"
    warnings = [r for r in caplog.records if r.name.startswith("zlops.slack.outbox") and r.levelno == logging.WARNING]
    assert warnings and any("C0PERF" in w.getMessage() for w in warnings)
    _no_token_anywhere(caplog, result)


def test_api_error_ok_false_fails(fake_slack: Any, tmp_path: Path, store: Store) -> None:
    fake_slack.fail("chat.postMessage", 200, body={"ok": False, "error": "channel_not_found"})
    result = _send({"channel": "C0NOPE", "text": "x"}, _client(fake_slack), fallback_dir=tmp_path, store=store)
    assert result.status == "failed" and "channel_not_found" in (result.error or "")


def test_rate_limit_is_retried_after_retry_after(fake_slack: Any, tmp_path: Path, store: Store,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake_slack.fail("chat.postMessage", 429, headers={"Retry-After": "1"})
    result = _send({"channel": "C0PERF", "text": "hello"}, _client(fake_slack), fallback_dir=tmp_path,
                          store=store)
    assert result.status == "sent" and result.ts == "1700000000.000001"
    assert [r.path for r in fake_slack.seen] == ["/api/chat.postMessage"] * 2
    _no_token_anywhere(caplog, result)


def test_a_long_retry_after_is_left_to_the_next_flush(fake_slack: Any, tmp_path: Path, store: Store) -> None:
    fake_slack.fail("chat.postMessage", 429, headers={"Retry-After": "3600"})
    result = _send({"channel": "C0PERF", "text": "x"}, _client(fake_slack), fallback_dir=tmp_path, store=store)
    assert result.status == "failed" and "ratelimited" in (result.error or "")
    assert len(fake_slack.calls("chat.postMessage")) == 1  # not an hour inside the step


def test_unreachable_server_fails_without_raising(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                  store: Store) -> None:
    caplog.set_level(logging.DEBUG)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once the probe is closed
    client = client_from_env(base_url=f"http://127.0.0.1:{port}/api", environ={"SLACK_BOT_TOKEN": TOKEN},
                             max_retries=1)
    result = _send({"channel": "C0PERF", "text": "x"}, client, fallback_dir=tmp_path, store=store)
    assert result.status == "failed" and "URLError" in (result.error or "")
    assert (tmp_path / "slack_payload.json").exists()
    _no_token_anywhere(caplog, result)


def test_without_client_the_payload_is_written(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                               store: Store) -> None:
    result = _send({"channel": "C0PERF", "text": "x"}, None, fallback_dir=tmp_path / "new", store=store)
    assert result == NotifyResult(status="written", path=tmp_path / "new" / "slack_payload.json")
    assert json.loads(result.path.read_text())["payload"] == {"channel": "C0PERF", "text": "x"}
    assert [i.status for i in store.outbox_items()] == ["pending"]  # a later flush with a token sends it


def test_unwritable_fallback_dir_still_does_not_raise(tmp_path: Path, store: Store) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = _send({"channel": "C0PERF", "text": "x"}, None, fallback_dir=blocker, store=store)
    assert result.status == "failed" and result.path is None


def test_client_from_env(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    assert client_from_env(environ={}) is None
    assert client_from_env(environ={"SLACK_BOT_TOKEN": "  "}) is None
    client = client_from_env("MY_TOKEN", environ={"MY_TOKEN": TOKEN}, base_url="http://127.0.0.1:9/api")
    assert client is not None and client.base_url == "http://127.0.0.1:9/api/"
    assert TOKEN not in repr(client) and TOKEN not in str(client)
    assert {type(h).__name__ for h in client.retry_handlers} == {
        "BoundedRateLimitRetry", "ConnectionErrorRetryHandler", "ServerErrorRetry"}
    assert all(TOKEN not in r.getMessage() for r in caplog.records)


def test_notify_result_rejects_unknown_status() -> None:
    with pytest.raises(ValueError, match=r"NotifyResult\.status"):
        NotifyResult(status="maybe", path=None)


def test_noise_judge_counts_name_the_configured_classes_cases_and_the_real_range() -> None:
    """Issue 22: under the noise judge a confirmed +3.35% is a regression beyond 2% (never "regressions (>5%)");
    a regression measured against a baseline on tonight's own commit is grouped under the range from the
    previous accepted commit, never the empty ``2222222..2222222``; Overall counts cases, not series."""
    def row(case: str, metric: str, verdict: Verdict, change: float, base_sha: str) -> Comparison:
        return Comparison("kernels", "gpu", case, metric, "ms", True, BaselinePoint("n1", base_sha, "ms", 1.0, 1),
                          Summary(1.0 + change / 100, 1), Judgement(verdict, change, change, 2.0))

    summary = _summary(row("sum/float16/(4096x4096, 1)", "latency", Verdict.REGRESSION, 3.35, SHA),
                       row("sum/float16/(4096x4096, 1)", "latency_base", Verdict.UNCHANGED, 0.1, SHA),
                       row("sum/float16/(64x64, 1)", "latency", Verdict.UNCHANGED, 0.2, SHA),
                       row("sum/float16/(64x64, 1)", "latency_base", Verdict.UNCHANGED, -0.2, SHA))
    messages = slack_summary_messages(summary, run=RUN, shards=SHARDS[:1], channel="C0PERF", judge="noise",
                                      thresholds=(2.0, 5.0), previous_sha="1" * 40)
    texts = _texts(messages.main)
    assert texts[2].startswith("*Overall: 0 of 2 cases improved, 1 regressed (4 series judged)*\n"
                               ":red_circle: 1 regressions (confirmed, >2%) · :large_green_circle: 0 improved")
    assert ">5%" not in texts[2] and "potential" not in texts[2]
    regressions = next(t for t in texts if t.startswith(":red_circle: *Regressions*"))
    assert regressions.startswith(":red_circle: *Regressions* (confirmed, worse by more than 2%)\n"
                                  "• *gpu* · `sum` · `1111111..2222222`: 1 series worse by 3.4%")


def test_a_partial_shard_is_said_beside_the_failures() -> None:
    """An ok shard whose benchmark exited with one of the suite's partial_exit_codes carries a note: Slack shows it
    (the cases it did not write are counted under 'Missing tonight')."""
    note = "partial: the benchmark exited with code 1 (the suite's partial_exit_codes): the results it wrote are kept"
    shards = [*SHARDS, ShardOutcome("npu", 1, "ascend", ShardStatus.OK, Path("a/npu-1"), 1, T0, T0, error=note)]
    texts = _texts(slack_summary_messages(SUMMARY, run=RUN, shards=shards, channel="C0PERF").main)
    (line,) = [t for t in texts if t.startswith(":warning: *Partial shards*")]
    assert line.endswith("• npu device 1 (ascend): ok: " + note)
    assert not any(t.startswith(":warning: *Partial shards*") for t in
                   _texts(slack_summary_messages(SUMMARY, run=RUN, shards=SHARDS, channel="C0PERF").main))
