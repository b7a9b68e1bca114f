"""Slack faults cost minutes, not a day (issue 14): retries inside the step, and flushes between nights.

Real ``slack_sdk`` clients against the fake Slack Web API on 127.0.0.1 (tests/fake_slack.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fake_slack import TOKEN, FakeSlack, fake_slack_server
from fake_upstream import Upstream, config_data

from zlops.cli import app as cli
from zlops.config.settings import load_config
from zlops.model import RunRecord, RunStatus
from zlops.slack.outbox import RETRY_COUNT
from zlops.steps.context import RunContext, open_store


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with fake_slack_server() as server:
        yield server


def _config(tmp_path: Path, fake: FakeSlack, upstream: Path | None = None, database: str | None = None) -> Path:
    data = config_data(tmp_path / "home", upstream or tmp_path / "nowhere", database=database)
    data["slack"] = {"channel": "#perf-nightly", "base_url": fake.url}
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _queue(cfg: Path, text: str) -> int:
    store = open_store(load_config(cfg))
    store.upsert_run(RunRecord(run_key="nightly:fake:n1", kind="nightly", suite="fake", sha="a" * 40,
                               branch="main", status=RunStatus.DONE))
    return store.queue_notification("nightly:fake:n1", "summary", "#perf-nightly",
                                    {"channel": "#perf-nightly", "text": text})


@pytest.mark.slow
def test_a_5xx_then_success_is_retried_within_the_report_step(
        tmp_path: Path, fake: FakeSlack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    up = Upstream(tmp_path / "upstream")
    sha = up.commit({"alpha": 1.0})
    cfg = _config(tmp_path, fake, up.path)
    fake.fail("chat.postMessage", 503)
    assert cli.main(["--plain", "nightly", "--config", str(cfg), "--suite", "fake", "--sha", sha,
                     "--run-id", "n1"]) == cli.EXIT_OK
    first, second = fake.calls("chat.postMessage")[:2]
    assert second.at - first.at >= 0.9  # backed off (1 s, with jitter upwards)
    assert first.args["text"] == second.args["text"] and second.args["text"].startswith("fake @")
    config = load_config(cfg)
    assert open_store(config).outbox_items() == []  # nothing left for tomorrow
    run_dir = RunContext(config, "fake", "nightly:fake:n1", sha).run_dir
    assert json.loads((run_dir / "slack_payload.json").read_text())["status"] == "sent"


def test_alert_flush_sends_what_an_outage_left(tmp_path: Path, fake: FakeSlack, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    monkeypatch.setattr("zlops.slack.outbox.SERVER_ERROR_BACKOFF_S", 0.01)
    cfg = _config(tmp_path, fake)
    note = _queue(cfg, "last night's summary")
    fake.fail("chat.postMessage", 500, times=1 + RETRY_COUNT)  # Slack is down for the whole first flush
    assert cli.main(["--plain", "alert", "flush", "--config", str(cfg)]) == cli.EXIT_ERROR
    assert "failed 1" in capsys.readouterr().out
    store = open_store(load_config(cfg))
    (item,) = store.outbox_items()
    assert item.id == note and item.status == "failed" and item.attempts == 1

    assert cli.main(["--plain", "alert", "flush", "--config", str(cfg)]) == cli.EXIT_OK  # Slack is back
    assert "sent 1, failed 0" in capsys.readouterr().out
    assert store.outbox_items() == []
    assert [p["text"] for p in fake.posts()][-1] == "last night's summary"
    assert len(fake.posts()) == 2 + RETRY_COUNT  # three refused, one taken: posted exactly once


def test_alert_flush_without_a_token_says_what_waits(tmp_path: Path, fake: FakeSlack,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path, fake)
    _queue(cfg, "x")
    assert cli.main(["--plain", "alert", "flush", "--config", str(cfg)]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "zlops: cannot flush the outbox: no Slack token in $SLACK_BOT_TOKEN; 1 message(s) wait" in err
    assert fake.seen == []


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_two_flushers_never_post_one_message_twice(tmp_path: Path, fake: FakeSlack, database: str,
                                                   request: pytest.FixtureRequest) -> None:
    """The report step and the outbox DAG flushing at the same moment (the outbox lock)."""
    import threading

    from zlops.slack.outbox import client_from_env, flush_outbox

    cfg = _config(tmp_path, fake, database=request.getfixturevalue("pg_url") if database == "postgresql" else None)
    for n in range(5):
        store = open_store(load_config(cfg))
        store.upsert_run(RunRecord(run_key=f"nightly:fake:n{n}", kind="nightly", suite="fake", sha="a" * 40,
                                   branch="main", status=RunStatus.DONE))
        store.queue_notification(f"nightly:fake:n{n}", "summary", "#perf-nightly",
                                 {"channel": "#perf-nightly", "text": f"night {n}"})
    client = client_from_env(base_url=fake.url, environ={"SLACK_BOT_TOKEN": TOKEN})
    threads = [threading.Thread(target=flush_outbox, args=(store, client)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(p["text"] for p in fake.posts()) == [f"night {n}" for n in range(5)]
    store.dispose()


@pytest.mark.airflow
@pytest.mark.slow
def test_the_outbox_dag_flushes_every_15_minutes(tmp_path: Path, fake: FakeSlack,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("airflow")
    from airflow.dag_processing.dagbag import DagBag
    from airflow.utils import db
    from airflow.utils.state import DagRunState

    cfg = _config(tmp_path, fake)
    monkeypatch.setenv("ZLOPS_CONFIG", str(cfg))
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)  # no slack_api_default connection: the env token is used
    _queue(cfg, "waiting since last night")
    db.resetdb()
    bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags" / "zlops_outbox.py"))
    assert bag.import_errors == {}
    dag = bag.get_dag("zlops_outbox")
    assert dag is not None and [t.task_id for t in dag.tasks] == ["flush"]
    assert dag.schedule == "*/15 * * * *" and not dag.catchup and dag.max_active_runs == 1
    run = dag.test()
    assert run.state == DagRunState.SUCCESS
    assert [p["text"] for p in fake.posts()] == ["waiting since last night"]
    assert open_store(load_config(cfg)).outbox_items() == []


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_a_flush_never_waits_forever_for_another(tmp_path: Path, fake: FakeSlack, database: str,
                                                 request: pytest.FixtureRequest) -> None:
    from zlops.slack.outbox import client_from_env, flush_outbox

    cfg = _config(tmp_path, fake, database=request.getfixturevalue("pg_url") if database == "postgresql" else None)
    _queue(cfg, "x")
    store = open_store(load_config(cfg))
    with store.outbox_lock() as first:
        assert first
        with store.outbox_lock(timeout_s=0.3) as second:
            assert not second
    with store.outbox_lock(timeout_s=0.3) as again:  # released
        assert again
    client = client_from_env(base_url=fake.url, environ={"SLACK_BOT_TOKEN": TOKEN})
    assert flush_outbox(store, client).sent and fake.posts()[0]["text"] == "x"
    store.dispose()
