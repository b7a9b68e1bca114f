"""The whole nightly on fake device pools: 4 NPUs behind the fake npu-smi, 2 MUSA GPUs behind the fake
mthreads-gmi. Each shard must be pinned through its backend's visibility variable and carry
telemetry rows for its own device, and the run's identity must name the (fake) hardware."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from fake_devices import use_fakebin
from fake_upstream import Upstream

from zlops.config.settings import Config
from zlops.host.telemetry import CSV_NAME, ERR_NAME, read_csv
from zlops.model import ShardStatus, Verdict
from zlops.steps.nightly import run_nightly

pytestmark = pytest.mark.slow

BASE = {"alpha": 1.0, "beta": 2.0}


@pytest.mark.parametrize(("backend", "devices", "var", "model", "driver"), [
    ("ascend", (0, 1, 2, 3), "ASCEND_RT_VISIBLE_DEVICES", "910B3", "24.1.RC2"),
    ("musa", (0, 1), "MUSA_VISIBLE_DEVICES", "MTT S80", "2.7.0"),
])
def test_nightly_on_a_fake_pool_pins_and_samples_every_device(
        upstream: Upstream, make_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch,
        backend: str, devices: tuple[int, ...], var: str, model: str, driver: str) -> None:
    use_fakebin(monkeypatch)
    c1 = upstream.commit(BASE)
    c2 = upstream.commit({**BASE, "alpha": 1.5})
    config = make_config(devices=devices, backend=backend)
    run_nightly(config, "fake", sha=c1, run_label="n1")
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    assert sorted(s.device for s in n2.shards) == list(devices)
    for shard in n2.shards:
        assert shard.status is ShardStatus.OK and shard.backend == backend
        manifest = json.loads((shard.artifact_dir / "manifest.json").read_text())
        assert manifest["env_added"] == {"ZL_BACKEND": backend, var: str(shard.device)}
        assert manifest["identity"]["device_model"] == model and manifest["identity"]["driver"] == driver
        rows = read_csv(shard.artifact_dir / CSV_NAME)
        assert rows and {int(r["index"]) for r in rows} == {shard.device}
        assert all(r["power_w"] is not None and r["temp_c"] is not None for r in rows)
        assert not (shard.artifact_dir / ERR_NAME).exists()
    assert {c.case: c.verdict for c in n2.summary.comparisons}["alpha"] is Verdict.REGRESSION


def test_auto_devices_pick_the_idle_range_once_per_run(
        upstream: Upstream, make_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch) -> None:
    """devices: auto on 8 fake NPUs with 2 and 3 busy: the run takes 4,5,6,7 and keeps that choice."""
    from zlops.steps.context import context_for, open_store
    from zlops.steps.fetch import fetch as fetch_step

    use_fakebin(monkeypatch, FAKE_NPU_BUSY="2,3")
    c1 = upstream.commit(BASE)
    config = make_config(backend="ascend")
    data = config.model_dump()
    data["pools"]["local"]["devices"] = "auto"
    from zlops.config.settings import parse_config

    auto_cfg = parse_config(data)
    n1 = run_nightly(auto_cfg, "fake", sha=c1, run_label="auto1")
    assert sorted(s.device for s in n1.shards) == [4, 5, 6, 7]
    assert all(s.status is ShardStatus.OK for s in n1.shards)
    run = open_store(auto_cfg).get_run(n1.run_key)
    assert run is not None and run.meta["auto_devices"] == [["local", [4, 5, 6, 7]]]
    # a retried step of the same run keeps the devices chosen at fetch, even if the idle set changed
    monkeypatch.setenv("FAKE_NPU_BUSY", "4,5")
    ctx = fetch_step(auto_cfg, "fake", run_key=n1.run_key, replace=True)
    assert ctx.pool_devices("local") == [4, 5, 6, 7]
    assert context_for(auto_cfg, "fake", n1.run_key).pool_devices("local") == [4, 5, 6, 7]


def test_a_dag_refuses_auto_devices(make_config: Callable[..., Config]) -> None:
    pytest.importorskip("airflow")
    from zlops.airflow.pools import planned_pools
    from zlops.config.settings import parse_config

    data = make_config().model_dump()
    data["pools"]["local"]["devices"] = "auto"
    cfg = parse_config(data)
    assert planned_pools(cfg) == {}
    from airflow.sdk import DAG

    from zlops.airflow.tasks import nightly_pipeline

    with DAG("t_auto", schedule=None), pytest.raises(ValueError, match="devices: auto"):
        nightly_pipeline(cfg, "fake")
