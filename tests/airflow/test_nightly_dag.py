"""The nightly DAG: imports cleanly, has the documented shape, and runs end to end with dag.test()."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from timing import real_timings

pytest.importorskip("airflow")

from fake_upstream import Upstream, config_data

from zlops.config.settings import load_config
from zlops.model import ShardStatus, Verdict
from zlops.steps.context import make_run_key, open_store

pytestmark = [pytest.mark.airflow]

REPO = Path(__file__).resolve().parents[2]
BASE = {"alpha": 1.0, "beta": 2.0}


@pytest.fixture(scope="module", autouse=True)
def airflow_db() -> None:
    from airflow.utils import db

    db.resetdb()


@pytest.fixture
def zlops_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Upstream]]:
    up = Upstream(tmp_path / "upstream")
    data = config_data(tmp_path / "home", up.path, devices=(0, 1))
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("ZLOPS_CONFIG", str(path))
    yield path, up


def dagbag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags"))


def test_dags_import_without_errors_and_parse_fast(zlops_config: tuple[Path, Upstream]) -> None:
    t0 = time.perf_counter()
    bag = dagbag()
    parse_s = time.perf_counter() - t0
    assert bag.import_errors == {}
    assert "zlops_nightly_fake" in bag.dag_ids
    assert parse_s < 5, f"DAG folder took {parse_s:.1f} s to parse: keep heavy imports inside tasks"


def test_nightly_dag_shape(zlops_config: tuple[Path, Upstream]) -> None:
    dag = dagbag().get_dag("zlops_nightly_fake")
    ids = set(dag.task_ids)
    assert {"fetch", "env", "run_local_0", "run_local_1", "ingest", "compare", "confirm_local", "report",
            "request_bisect", "promote_baseline", "cleanup", "watcher"} == ids
    assert dag.get_task("request_bisect").upstream_task_ids == {"report"}
    assert [o.uri for o in dag.get_task("request_bisect").outlets] == ["zlops://bisect/requests"]
    assert dag.get_task("confirm_local").pool == "zlops-local-0"
    assert dag.get_task("report").upstream_task_ids == {"confirm_local"}
    assert dag.get_task("run_local_0").pool == "zlops-local-0"
    assert dag.get_task("run_local_1").pool == "zlops-local-1"
    assert {t.pool for t in dag.tasks if not t.task_id.startswith(("run_", "confirm_"))} == {"default_pool"}
    assert dag.get_task("env").upstream_task_ids == {"fetch"}
    assert dag.get_task("ingest").upstream_task_ids == {"run_local_0", "run_local_1"}
    assert dag.get_task("ingest").trigger_rule == "all_done"
    assert dag.get_task("cleanup").upstream_task_ids == {"promote_baseline"}
    assert dag.get_task("cleanup").trigger_rule == "all_done"
    assert dag.catchup is False


def test_missing_config_is_an_import_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZLOPS_CONFIG", raising=False)
    errors = dagbag().import_errors
    assert any("ZLOPS_CONFIG is not set" in str(e) for e in errors.values())


def test_bad_sha_param_is_rejected(airflow_db: None, zlops_config: tuple[Path, Upstream]) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    dag = dagbag().get_dag("zlops_nightly_fake")
    with pytest.raises(ParamValidationError):
        dag.test(run_conf={"sha": "--upload-pack=x"})


def test_promote_param_is_a_validated_boolean(airflow_db: None, zlops_config: tuple[Path, Upstream]) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    dag = dagbag().get_dag("zlops_nightly_fake")
    assert dag.params["promote"] is False  # off unless a person asks for a backfill
    with pytest.raises(ParamValidationError):
        dag.test(run_conf={"promote": "yes"})


@pytest.mark.slow
def test_dag_runs_two_nights_and_flags_the_regression(airflow_db: None,
                                                     zlops_config: tuple[Path, Upstream]) -> None:
    from airflow.models.pool import Pool

    from zlops.airflow.pools import sync_pools

    path, up = zlops_config
    c1 = up.commit(BASE)
    c2 = up.commit({"alpha": 1.5, "beta": 2.0}, behaviour={"1": "crash"})
    config = load_config(path)
    assert sync_pools(config) == ["zlops-local-0", "zlops-local-1"]
    assert Pool.get_pool("zlops-local-0").slots == 1
    dag = dagbag().get_dag("zlops_nightly_fake")
    first = dag.test(run_conf={"sha": c1})
    assert first.state == "success"
    second = dag.test(run_conf={"sha": c2})
    # device 1 crashed: the run is marked failed by the watcher, but nothing else was lost
    assert second.state == "failed"
    states = {ti.task_id: ti.state for ti in second.get_task_instances()}
    assert states["run_local_1"] == "failed"
    assert states["request_bisect"] == "skipped"  # one commit in the range: it is the culprit, nothing to bisect
    assert all(states[t] == "success" for t in ("run_local_0", "ingest", "compare", "confirm_local", "report",
                                                "promote_baseline", "cleanup"))
    store = open_store(config)
    run = store.get_run(make_run_key("nightly", "fake", second.run_id))
    # judged and reported, but half the pool failed: never a baseline (promote_min_ok_share, issue 24)
    assert run is not None and run.sha == c2 and not run.accepted
    assert run.meta["promotion"]["reason"].startswith("1 of 2 shards of pool local ended OK (failed the rest)")
    verdicts = {c.case: c.verdict for c in store.comparisons(run.run_key)}
    assert verdicts == {"alpha": Verdict.REGRESSION, "beta": Verdict.UNCHANGED}
    shards = {s.device: s.status for s in store.shards(run.run_key)}
    assert shards == {0: ShardStatus.OK, 1: ShardStatus.FAILED}
    assert not any((config.worktrees_dir / "fake").iterdir())
    # the promote param accepts the half-measured c2 on purpose, saying what it overrode
    forced = dag.test(run_conf={"sha": c2, "promote": True})
    accepted_c2 = store.get_run(make_run_key("nightly", "fake", forced.run_id))
    assert accepted_c2 is not None and accepted_c2.accepted
    assert "overriding: 1 of 2 shards of pool local ended OK" in accepted_c2.meta["promotion"]["reason"]
    # a backfill of the older c1 is promoted only because the trigger's promote param says so
    third = dag.test(run_conf={"sha": c1, "promote": True})
    backfill = store.get_run(make_run_key("nightly", "fake", third.run_id))
    assert backfill is not None and backfill.sha == c1 and backfill.accepted
    assert backfill.meta["promotion"]["forced"] is True
    assert f"overriding: commit {c1[:7]} is older than the current baseline" in backfill.meta["promotion"]["reason"]


@pytest.mark.slow
@real_timings
def test_dag_on_the_demo_upstream_flags_the_softmax_regression(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """dag.test() over two real nights of the demo upstream (real numpy timing, CPU pool)."""
    from zlops.airflow.pools import sync_pools
    from zlops.demo import create_upstream, demo_config_data

    home = tmp_path / "demo"
    shas = create_upstream(home / "upstream")
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(demo_config_data(home, rounds=5, workers=3)))
    monkeypatch.setenv("ZLOPS_CONFIG", str(path))
    config = load_config(path)
    sync_pools(config)
    dag = dagbag().get_dag("zlops_nightly_demo-ops")
    assert dag.test(run_conf={"sha": shas[1][:12]}).state == "success"  # a short SHA is accepted
    night3 = dag.test(run_conf={"sha": shas[2]})
    assert night3.state == "success"
    store = open_store(config)
    run = store.get_run(make_run_key("nightly", "demo-ops", night3.run_id))
    assert run is not None and run.sha == shas[2]
    by_case = {c.case: c for c in store.comparisons(run.run_key)}
    assert by_case["softmax"].verdict is Verdict.REGRESSION
    assert by_case["softmax"].base is not None and by_case["softmax"].base.sha == shas[1]
    assert all(by_case[op].verdict is not Verdict.REGRESSION for op in ("cumsum", "gelu", "layernorm", "matmul"))
