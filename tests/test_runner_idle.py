"""run_shard(require_idle=True) on the fake npu-smi: a device busy with a foreign process is waited
for, then SKIPPED with its state; an idle one runs, pinned, with telemetry for that device."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest
from fake_devices import use_fakebin

from zlops.config.settings import SuiteConfig
from zlops.host.telemetry import CSV_NAME, read_csv
from zlops.model import ShardStatus
from zlops.run.runner import ShardSpec, read_manifest, run_shard

BENCH = ("import json, os, sys; "
         "json.dump(dict(seen=os.environ.get('ASCEND_RT_VISIBLE_DEVICES')), open(sys.argv[1], 'w'))")


def _spec(tmp_path: Path, device: int, backend: str = "ascend") -> ShardSpec:
    worktree = tmp_path / "wt"
    worktree.mkdir(parents=True, exist_ok=True)
    suite = SuiteConfig(repo=str(tmp_path / "up"), format="zlops-json", pools=["p"], rounds=1, timeout_s=60,
                        command=["python", "-c", BENCH, "{results}"])
    return ShardSpec(run_key="r", suite_name="s", suite=suite, sha="0" * 40, pool="p", backend=backend,
                     device=device, worktree=worktree, venv=Path(sys.prefix),
                     artifact_dir=tmp_path / "art" / str(device))


def _run(spec: ShardSpec, tmp_path: Path, wait_s: float) -> ShardStatus:
    out = run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=wait_s, telemetry_interval_s=0.05,
                    require_idle=True, idle_poll_s=0.05)
    return out.status


def test_a_busy_device_is_skipped_with_its_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakebin(monkeypatch, FAKE_NPU_BUSY="2,3")
    spec = _spec(tmp_path, 3)
    out = run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0.3, require_idle=True, idle_poll_s=0.05)
    assert out.status is ShardStatus.SKIPPED
    assert out.error == ("ascend device 3 is used by a foreign process (busy: 59356 of 65536 MiB in use, "
                         "1 process) after waiting 0.3 s")
    assert not spec.results_file.exists()
    assert read_manifest(spec.artifact_dir)["status"] == "skipped"  # type: ignore[index]


def test_an_idle_device_runs_pinned_with_its_telemetry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakebin(monkeypatch, FAKE_NPU_BUSY="2,3")
    spec = _spec(tmp_path, 4)
    assert _run(spec, tmp_path, 0.3) is ShardStatus.OK
    assert spec.results_file.read_text() == '{"seen": "4"}'
    rows = read_csv(spec.artifact_dir / CSV_NAME)
    assert rows and {r["index"] for r in rows} == {4}
    identity = read_manifest(spec.artifact_dir)["identity"]  # type: ignore[index]
    assert (identity["device_model"], identity["driver"]) == ("910B3", "24.1.RC2")


def test_a_device_that_frees_within_the_wait_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakebin(monkeypatch, FAKE_NPU_BUSY="2")
    timer = threading.Timer(0.3, os.environ.__setitem__, ("FAKE_NPU_BUSY", ""))
    timer.start()
    try:
        assert _run(_spec(tmp_path, 2), tmp_path, 20) is ShardStatus.OK
    finally:
        timer.cancel()


def test_without_the_tool_the_check_does_not_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    spec = _spec(tmp_path, 0)
    assert _run(spec, tmp_path, 0) is ShardStatus.OK
    assert "npu-smi not found" in (spec.artifact_dir / "telemetry.err").read_text()
    cpu = _spec(tmp_path / "cpu", 0, backend="cpu")
    assert _run(cpu, tmp_path, 0) is ShardStatus.OK  # cpu memory is never 0: it has no idleness check
