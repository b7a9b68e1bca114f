"""The whole nightly on fake device pools: 4 NPUs behind the fake npu-smi, 2 MUSA GPUs behind the fake
mthreads-gmi. Each shard must be pinned through its backend's visibility variable and carry
telemetry rows for its own device, and the run's identity must name the (fake) hardware."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from fake_devices import use_fakebin
from fake_upstream import Upstream

from zlops.config import Config
from zlops.model import ShardStatus, Verdict
from zlops.nightly import run_nightly
from zlops.telemetry import CSV_NAME, ERR_NAME, read_csv

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
        assert manifest["env_added"] == {var: str(shard.device)}
        assert manifest["identity"]["device_model"] == model and manifest["identity"]["driver"] == driver
        rows = read_csv(shard.artifact_dir / CSV_NAME)
        assert rows and {int(r["index"]) for r in rows} == {shard.device}
        assert all(r["power_w"] is not None and r["temp_c"] is not None for r in rows)
        assert not (shard.artifact_dir / ERR_NAME).exists()
    assert {c.case: c.verdict for c in n2.summary.comparisons}["alpha"] is Verdict.REGRESSION
