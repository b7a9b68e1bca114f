"""The nightly DAG on a config with hosts: device tasks routed to their host's queue, one cleanup per
host, and a partitioned suite run with dag.test() (the Celery run itself is test_celery_e2e.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("airflow")

from sharded_upstream import ShardedUpstream, sharded_suite

from zlops.config.settings import load_config
from zlops.steps.context import make_run_key, open_store

pytestmark = [pytest.mark.airflow]

REPO = Path(__file__).resolve().parents[2]
CASES = {"heavy": 3.0, "mid": 2.0, "l1": 1.0, "l2": 1.0, "l3": 1.0}


@pytest.fixture(scope="module", autouse=True)
def airflow_db() -> None:
    from airflow.utils import db

    db.resetdb()


@pytest.fixture
def hosts_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, ShardedUpstream]]:
    up = ShardedUpstream(tmp_path / "upstream")
    up.commit_cases(CASES, {c: 0.05 for c in CASES})
    data = {
        "home": str(tmp_path / "home"), "judge": "simple", "device_wait_s": 5,
        "contention": {"gate": False},  # scripted timings; the CI host's load is not what is judged
        "hosts": {"gpu-a": {"queue": "gpu_a"}, "gpu-b": {}},
        "pools": {"h200": {"backend": "cpu", "devices": [0, 1], "host": "gpu-a"},
                  "s5000": {"backend": "cpu", "devices": [0, 1, 2], "host": "gpu-b"}},
        "suites": {"ops": sharded_suite(up.path, ["h200", "s5000"], cases=sorted(CASES), rounds=1)},
    }
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("ZLOPS_CONFIG", str(path))
    yield path, up


def _dag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags" / "zlops_nightly.py"))
    assert bag.import_errors == {}
    return bag.get_dag("zlops_nightly_ops")


def test_device_tasks_go_to_their_hosts_queue_and_pool(hosts_config: tuple[Path, ShardedUpstream]) -> None:
    dag = _dag()
    queues = {t.task_id: t.queue for t in dag.tasks}
    pools = {t.task_id: t.pool for t in dag.tasks}
    assert {k: v for k, v in queues.items() if k.startswith(("run_", "confirm_", "cleanup_"))} == {
        "run_h200_0": "gpu_a", "run_h200_1": "gpu_a", "confirm_h200": "gpu_a",
        "run_s5000_0": "gpu-b", "run_s5000_1": "gpu-b", "run_s5000_2": "gpu-b", "confirm_s5000": "gpu-b",
        "cleanup_gpu-b": "gpu-b", "cleanup_gpu_a": "gpu_a"}
    assert {queues[t] for t in ("fetch", "env", "ingest", "compare", "report", "promote_baseline", "cleanup")} \
        == {"default"}
    assert pools["run_s5000_2"] == "zlops-s5000-2" and pools["confirm_s5000"] == "zlops-s5000-0"
    assert dag.get_task("cleanup_gpu-b").upstream_task_ids == {"promote_baseline"}
    assert dag.get_task("cleanup_gpu-b").trigger_rule == "all_done"
    assert "cleanup_gpu-b" in dag.get_task("watcher").upstream_task_ids


def test_sync_pools_names_the_host_and_queue(hosts_config: tuple[Path, ShardedUpstream]) -> None:
    from zlops.airflow.pools import planned_pools

    got = planned_pools(load_config(hosts_config[0]))
    assert got["zlops-h200-1"] == "zlops: cpu device 1 of pool h200 on host gpu-a (queue gpu_a)"
    assert len(got) == 5


@pytest.mark.slow
def test_partitioned_nightly_with_dag_test(hosts_config: tuple[Path, ShardedUpstream]) -> None:
    from zlops.airflow.pools import sync_pools
    from zlops.run.partition import Plan

    path, _ = hosts_config
    config = load_config(path)
    sync_pools(config)
    run = _dag().test()
    assert run.state == "success"
    env = next(ti for ti in run.get_task_instances() if ti.task_id == "env")
    summary = env.xcom_pull(task_ids="env")["partition"]
    assert summary["s5000"].startswith("pool s5000: 5 cases over 3 devices by LPT (equal weights, 1 rounds)")
    store = open_store(config)
    record = store.get_run(make_run_key("nightly", "ops", run.run_id))
    assert record is not None and record.accepted
    for pool in ("h200", "s5000"):
        plan = Plan.from_dict(record.meta["partition"][pool])
        ran = {(d, r.case) for p, d, r in store.results(record.run_key) if p == pool}
        assert ran == {(d, c) for d, cases in plan.assignments.items() for c in cases}
        assert sorted(c for _, c in ran) == sorted(CASES)
