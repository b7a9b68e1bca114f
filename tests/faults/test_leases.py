"""Device leases: they outlive a killed zlops, and they are host-wide (two homes share them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_upstream import config_data
from fault_upstream import REPO, alive, kill_quietly, overlaps, wait_gone, wait_started

from zlops.config.settings import parse_config
from zlops.errors import DeviceBusy
from zlops.host.locks import default_locks_dir, device_lease, holder
from zlops.model import ShardStatus
from zlops.run.runner import ShardSpec, run_shard

CHILD = """
import pickle, sys
from pathlib import Path
from zlops.run.runner import run_shard
spec = pickle.loads(bytes.fromhex(sys.argv[1]))
run_shard(spec, locks_dir=Path(sys.argv[2]), device_wait_s=0, telemetry_interval_s=0.05)
"""


@pytest.mark.timeout(60)
def test_a_sigkilled_zlops_leaves_the_device_leased_to_its_orphan_benchmark(
        tmp_path: Path, shard_spec: Callable[..., ShardSpec], probe: Path) -> None:
    import pickle

    locks = tmp_path / "locks"
    spec = shard_spec("killed", sleep_s=30)
    child = subprocess.Popen([sys.executable, "-c", CHILD, pickle.dumps(spec).hex(), str(locks)],
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    orphan = wait_started(probe, proc=child)[0]
    try:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        assert alive(orphan), "the benchmark must outlive the killed zlops (it is in its own session)"
        # the orphan holds the lease: nobody else may start on the device while it runs
        with pytest.raises(DeviceBusy, match=f"benchmark pid {orphan}"), \
                device_lease(locks, "cpu", 0, wait_s=0.2, owner="next-night"):
            pytest.fail("the device was leased twice")
        assert holder(locks, "cpu", 0)["benchmark_pid"] == orphan  # type: ignore[index]
        os.killpg(orphan, signal.SIGKILL)
        assert wait_gone(orphan)
        with device_lease(locks, "cpu", 0, wait_s=5, owner="next-night") as lease:
            assert lease.waited < 5
    finally:
        kill_quietly(orphan)


def test_two_homes_on_one_host_never_share_a_device_at_once(
        tmp_path: Path, shard_spec: Callable[..., ShardSpec], probe: Path) -> None:
    configs = [parse_config(config_data(tmp_path / name, tmp_path / "upstream"), source=f"{name}.yaml")
               for name in ("home-a", "home-b")]
    assert configs[0].locks_dir == configs[1].locks_dir, "device leases must not live under a config's home"
    assert not configs[0].locks_dir.is_relative_to(tmp_path / "home-a")
    outcomes = {}

    def run(i: int) -> None:
        spec = shard_spec(f"night-{i}", sleep_s=0.6)
        outcomes[i] = run_shard(spec, locks_dir=configs[i].locks_dir, device_wait_s=30, telemetry_interval_s=0.05)

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [outcomes[i].status for i in (0, 1)] == [ShardStatus.OK, ShardStatus.OK]
    assert overlaps(probe) == []


def test_default_locks_dir_is_host_wide(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ZLOPS_LOCKS_DIR", str(tmp_path / "shared"))
    assert default_locks_dir() == tmp_path / "shared"
    monkeypatch.delenv("ZLOPS_LOCKS_DIR")
    got = default_locks_dir()
    assert got == Path("/var/lock/zlops") or got.name == f"zlops-locks-{os.getuid()}"
    cfg = parse_config(config_data(tmp_path / "home", tmp_path / "up"), source="t.yaml")
    assert cfg.locks_dir == got
    cfg = parse_config({**config_data(tmp_path / "home", tmp_path / "up"), "locks_dir": str(tmp_path / "l")},
                       source="t.yaml")
    assert cfg.locks_dir == tmp_path / "l"


@pytest.mark.timeout(60)
def test_a_detached_worker_keeps_the_device_leased_for_the_next_night(
        tmp_path: Path, shard_spec: Callable[..., ShardSpec], probe: Path) -> None:
    """A benchmark that daemonizes a worker (double fork + setsid: a real detached process that keeps the
    lease's fd) ends OK, but the device stays leased while the worker lives: the next night's shard is
    skipped naming the worker, never started beside it. On main the lease was unlocked explicitly at
    shard end (LOCK_UN frees it for every holder of the open file) and the next shard ran beside it."""
    locks = tmp_path / "locks"
    first = run_shard(shard_spec("detach", mode="detach"), locks_dir=locks, device_wait_s=0,
                      telemetry_interval_s=0.05)
    worker = int((probe / "detached.pid").read_text())
    try:
        assert first.status is ShardStatus.OK, first.error
        assert alive(worker)
        manifest = json.loads((first.artifact_dir / "manifest.json").read_text())
        assert [d["pid"] for d in manifest["detached"]] == [worker]  # reported: pid and command
        assert "bench.py" in manifest["detached"][0]["cmd"]
        assert [d["pid"] for d in holder(locks, "cpu", 0)["detached"]] == [worker]  # type: ignore[index]
        nxt = run_shard(shard_spec("next-night"), locks_dir=locks, device_wait_s=0.5, telemetry_interval_s=0.05)
        assert nxt.status is ShardStatus.SKIPPED
        assert f"pid {worker}" in (nxt.error or "") and "detached" in (nxt.error or "")
        assert overlaps(probe) == []  # the benchmark's own detector: nobody ran beside the worker
        os.kill(worker, signal.SIGKILL)
        assert wait_gone(worker)
        # the last holder is gone: the kernel dropped the lock, the device is free again
        again = run_shard(shard_spec("third-night"), locks_dir=locks, device_wait_s=2, telemetry_interval_s=0.05)
        assert again.status is ShardStatus.OK and overlaps(probe) == []
    finally:
        kill_quietly(worker)
