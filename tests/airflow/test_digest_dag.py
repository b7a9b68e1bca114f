"""The zlops_digest DAG: every Monday, the week's trust ledger to Slack through the outbox (dag.test(), fake Slack)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytest.importorskip("airflow")

from fake_slack import TOKEN, fake_slack_server
from triage_nights import build

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


def test_the_digest_dag_posts_the_weeks_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.utils import db
    from airflow.utils.state import DagRunState

    nights = build(tmp_path)
    with fake_slack_server() as fake:
        data = yaml.safe_load(nights.config_path.read_text())
        data["slack"] = {"channel": "#perf", "base_url": fake.url}
        nights.config_path.write_text(yaml.safe_dump(data))
        monkeypatch.setenv("ZLOPS_CONFIG", str(nights.config_path))
        monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)  # no slack_api_default connection: the env token is used
        db.resetdb()
        bag = DagBag(dag_folder=str(Path(__file__).resolve().parents[2] / "dags" / "zlops_digest.py"))
        assert bag.import_errors == {}
        dag = bag.get_dag("zlops_digest")
        assert dag is not None and [t.task_id for t in dag.tasks] == ["post_digest"]
        assert dag.schedule == "0 9 * * 1" and not dag.catchup and dag.max_active_runs == 1
        assert dag.test().state == DagRunState.SUCCESS
        (post,) = [p for p in fake.posts() if p["text"].startswith("zlops trust ledger")]
    # the two alerts the nights opened (this week, by the wall clock), both waiting for a person
    assert "Alerts opened: 2; confirmed (announced): 2" in str(post["blocks"])
    assert "waiting for a person: 2" in str(post["blocks"])
