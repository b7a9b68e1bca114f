"""The zlops_bisect DAG: scheduled on the nightly's request asset, and a request end to end with dag.test()."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

pytest.importorskip("airflow")

from fake_upstream import Upstream, config_data

from zlops.bisect.run import ids_from_events
from zlops.bisect.search import State
from zlops.config.settings import load_config
from zlops.errors import ZlopsError
from zlops.steps.context import open_store

pytestmark = [pytest.mark.airflow]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def airflow_db() -> None:
    from airflow.utils import db

    db.resetdb()


@pytest.fixture
def zlops_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Upstream]]:
    up = Upstream(tmp_path / "upstream")
    data = config_data(tmp_path / "home", up.path, devices=(0,))
    data["bisect"] = {"min_pairs": 2, "max_pairs": 4}
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("ZLOPS_CONFIG", str(path))
    yield path, up


def dagbag():  # type: ignore[no-untyped-def]
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags"))


def test_bisect_dag_shape(zlops_config: tuple[Path, Upstream]) -> None:
    bag = dagbag()
    assert bag.import_errors == {}
    dag = bag.get_dag("zlops_bisect")
    assert set(dag.task_ids) == {"bisect"}
    assert "zlops://bisect/requests" in str(dag.timetable.asset_condition)
    assert dag.params["alert_id"] is None and dag.max_active_runs == 1


def test_event_ids_are_validated() -> None:
    ev = SimpleNamespace(extra={"alert_ids": [3, "4"]})
    assert ids_from_events({"zlops://bisect/requests": [ev]}) == [3, 4]
    assert ids_from_events(None) == []
    with pytest.raises(ZlopsError, match="positive integer"):
        ids_from_events({"a": [SimpleNamespace(extra={"alert_ids": ["5; rm -rf /"]})]})


@pytest.mark.slow
def test_nightly_requests_and_the_bisect_dag_finds_the_culprit(zlops_config: tuple[Path, Upstream]) -> None:
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    path, up = zlops_config
    base = {"alpha": 1.0, "beta": 2.0}
    c0 = up.commit(base, "c0")
    (up.path / "NOTES").write_text("1")
    c1 = up.commit(base, "c1: docs")
    c2 = up.commit({"alpha": 1.3, "beta": 2.0}, "c2: alpha slower")
    (up.path / "NOTES").write_text("3")
    c3 = up.commit({"alpha": 1.3, "beta": 2.0}, "c3: docs")
    bag = dagbag()
    nightly = bag.get_dag("zlops_nightly_fake")
    assert nightly.test(run_conf={"sha": c0}).state == "success"
    second = nightly.test(run_conf={"sha": c3})
    assert second.state == "success"
    states = {ti.task_id: ti.state for ti in second.get_task_instances()}
    assert states["request_bisect"] == "success"
    config = load_config(path)
    store = open_store(config)
    (alert,) = store.alerts(suite="fake")
    with create_session() as session:
        events = session.query(AssetEvent).all()
    assert [e.extra.get("alert_ids") for e in events if e.extra.get("alert_ids")] == [[alert.id]]
    run = bag.get_dag("zlops_bisect").test(run_conf={"alert_id": alert.id})
    assert run.state == "success"
    b = store.bisection_of_alert(alert.id)
    assert b.state is State.FOUND and b.culprit_sha == c2 and c1 in b.commits
