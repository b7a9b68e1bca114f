"""run_shard with a fake benchmark: statuses, manifest, run.log, device pinning, locks, stale results."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from zlops.config.settings import SuiteConfig
from zlops.host.locks import device_lock
from zlops.model import ShardStatus
from zlops.run.runner import (
    MANIFEST,
    RUN_LOG,
    ShardSpec,
    outcome_from_manifest,
    read_manifest,
    render_command,
    run_shard,
)

SHA = "0123456789abcdef0123456789abcdef01234567"

BENCH = r'''
import argparse, json, os, subprocess, sys, time
ap = argparse.ArgumentParser()
ap.add_argument("--out"); ap.add_argument("--device"); ap.add_argument("--rounds"); ap.add_argument("--mode")
a = ap.parse_args()
seen = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "VIRTUAL_ENV", "SUITE_VAR", "SLACK_BOT_TOKEN")}
print("BENCH-ENV " + json.dumps(seen), flush=True)
print("bench-stderr-line", file=sys.stderr, flush=True)
if a.mode == "fail":
    sys.exit(3)
if a.mode == "noresults":
    sys.exit(0)
if a.mode == "hang":
    child = "import os, time; open('grandchild.pid', 'w').write(str(os.getpid())); time.sleep(120)"
    subprocess.Popen([sys.executable, "-c", child])
    time.sleep(120)
if a.mode == "slow":
    time.sleep(0.4)
json.dump({"device": a.device, "rounds": a.rounds, "env": seen, "python": sys.executable}, open(a.out, "w"))
'''


def _spec(tmp_path: Path, mode: str = "ok", *, backend: str = "cpu", device: int = 0, timeout_s: float = 60,
          command: list[str] | None = None) -> ShardSpec:
    worktree = tmp_path / "worktree"
    worktree.mkdir(exist_ok=True)
    (worktree / "bench.py").write_text(BENCH)
    suite = SuiteConfig(
        repo=str(tmp_path / "upstream"), format="zlops-json", pools=["p"], rounds=3, timeout_s=timeout_s,
        env={"SUITE_VAR": "from-suite"},
        command=command or ["python", "bench.py", "--out", "{results}", "--device", "{device}",
                            "--rounds", "{rounds}", "--mode", mode],
    )
    return ShardSpec(run_key="run-1", suite_name="demo-ops", suite=suite, sha=SHA, pool="p", backend=backend,
                     device=device, worktree=worktree, venv=Path(sys.prefix),
                     artifact_dir=tmp_path / "artifacts" / "p" / str(device))


def _run(spec: ShardSpec, tmp_path: Path, wait_s: float = 0) -> Any:
    return run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=wait_s, telemetry_interval_s=0.05)


def _manifest(spec: ShardSpec) -> dict[str, Any]:
    data = read_manifest(spec.artifact_dir)
    assert data is not None
    return data


def test_ok_shard_writes_results_and_a_complete_manifest(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "slow")
    out = _run(spec, tmp_path)
    assert out.status is ShardStatus.OK and out.error is None and out.exit_code == 0
    assert out.results_file == spec.results_file and spec.results_file.exists()
    assert out.duration_s is not None and out.duration_s >= 0.4
    results = json.loads(spec.results_file.read_text())
    assert results["device"] == "0" and results["rounds"] == "3" and results["env"]["SUITE_VAR"] == "from-suite"
    assert results["python"].startswith(sys.prefix)  # the venv's bin comes first on PATH
    m = _manifest(spec)
    assert m["status"] == "ok" and m["exit_code"] == 0 and m["error"] is None
    assert m["argv"] == ["python", "bench.py", "--out", str(spec.results_file), "--device", "0", "--rounds", "3",
                         "--mode", "slow"]
    assert m["commit"] == SHA and m["suite"] == "demo-ops" and m["run_key"] == "run-1"
    assert m["env_added"] == {"SUITE_VAR": "***", "ZL_BACKEND": "cpu"}  # by name: not in env_public
    assert m["cwd"] == str(spec.worktree) and m["venv"] == sys.prefix and m["manifest_version"] == 1
    assert m["started_at"] and m["ended_at"] and m["started_at"] <= m["ended_at"]
    assert m["identity"]["backend"] == "cpu"
    log = (spec.artifact_dir / RUN_LOG).read_text()
    assert "BENCH-ENV" in log and "bench-stderr-line" in log
    assert len((spec.artifact_dir / "telemetry.csv").read_text().splitlines()) >= 2
    assert not (spec.artifact_dir / (MANIFEST + ".tmp")).exists()
    again = outcome_from_manifest(m, spec.artifact_dir)
    assert (again.status, again.exit_code, again.results_file) == (ShardStatus.OK, 0, spec.results_file)


def test_nonzero_exit_is_failed_with_the_log_path(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "fail")
    out = _run(spec, tmp_path)
    assert out.status is ShardStatus.FAILED and out.exit_code == 3 and out.results_file is None
    assert out.error == f"benchmark exited with code 3; see {spec.artifact_dir / RUN_LOG}"
    m = _manifest(spec)
    assert m["status"] == "failed" and m["exit_code"] == 3 and m["error"] == out.error


def test_exit_zero_without_results_is_failed(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "noresults")
    out = _run(spec, tmp_path)
    assert out.status is ShardStatus.FAILED and out.exit_code == 0
    assert out.error is not None and "wrote no results file" in out.error and str(spec.results_file) in out.error


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "hang", timeout_s=1.5)
    start = time.monotonic()
    out = _run(spec, tmp_path)
    assert time.monotonic() - start < 15
    assert out.status is ShardStatus.TIMEOUT and out.exit_code is None
    assert out.error == "timed out after 1.5 s; process group killed"
    assert _manifest(spec)["status"] == "timeout"
    pid = int((spec.worktree / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the benchmark's worker outlived the shard timeout"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_missing_program_is_failed_not_raised(tmp_path: Path) -> None:
    spec = _spec(tmp_path, command=["zlops-no-such-bench", "{results}"])
    out = _run(spec, tmp_path)
    assert out.status is ShardStatus.FAILED and out.error is not None and "program not found" in out.error


def test_cuda_pins_the_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # no nvidia-smi, even on a GPU host
    spec = _spec(tmp_path, backend="cuda", device=2)
    out = _run(spec, tmp_path)
    assert out.status is ShardStatus.OK and out.backend == "cuda"
    env = json.loads(spec.results_file.read_text())["env"]
    assert env["CUDA_VISIBLE_DEVICES"] == "2" and env["SLACK_BOT_TOKEN"] is None
    assert env["VIRTUAL_ENV"] == sys.prefix
    m = _manifest(spec)
    assert m["env_added"] == {"SUITE_VAR": "***", "ZL_BACKEND": "cuda", "CUDA_VISIBLE_DEVICES": "2"}
    assert "nvidia-smi not found on PATH" in (spec.artifact_dir / "telemetry.err").read_text()


def test_cpu_pins_nothing_and_drops_a_stale_visibility_variable(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    spec = _spec(tmp_path, backend="cpu")
    assert _run(spec, tmp_path).status is ShardStatus.OK
    assert json.loads(spec.results_file.read_text())["env"]["CUDA_VISIBLE_DEVICES"] is None
    assert '"CUDA_VISIBLE_DEVICES": null' in (spec.artifact_dir / RUN_LOG).read_text()
    assert "CUDA_VISIBLE_DEVICES" not in _manifest(spec)["env_added"]


def test_busy_device_skips_the_shard(tmp_path: Path) -> None:
    spec = _spec(tmp_path, backend="nvidia", device=1)
    with device_lock(tmp_path / "locks", "cuda", 1, wait_s=0, owner="someone-elses-run"):
        start = time.monotonic()
        out = _run(spec, tmp_path, wait_s=0.5)
        assert time.monotonic() - start >= 0.5
    assert out.status is ShardStatus.SKIPPED and out.exit_code is None and out.started_at is None
    assert out.error is not None and "cuda:1" in out.error and "someone-elses-run" in out.error
    assert not spec.results_file.exists() and not (spec.artifact_dir / RUN_LOG).exists()
    m = _manifest(spec)
    assert m["status"] == "skipped" and m["error"] == out.error and m["started_at"] is None


def test_the_device_lock_is_released_after_the_shard(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    assert _run(spec, tmp_path).status is ShardStatus.OK
    with device_lock(tmp_path / "locks", "cpu", 0, wait_s=0, owner="next"):
        pass


def test_stale_results_and_log_are_removed_before_the_run(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "noresults")
    spec.artifact_dir.mkdir(parents=True)
    spec.results_file.write_text('{"stale": true}')
    (spec.artifact_dir / RUN_LOG).write_text("LAST-ATTEMPT\n")
    (spec.artifact_dir / "telemetry.err").write_text("old reason\n")
    out = _run(spec, tmp_path)
    assert out.status is ShardStatus.FAILED and "wrote no results" in (out.error or "")
    assert not spec.results_file.exists()
    assert "LAST-ATTEMPT" not in (spec.artifact_dir / RUN_LOG).read_text()
    assert not (spec.artifact_dir / "telemetry.err").exists()


def test_render_command_fills_every_placeholder(tmp_path: Path) -> None:
    spec = _spec(tmp_path, command=["x", "{results}", "--d={device}", "{devices}", "{rounds}", "{worktree}",
                                    "{artifacts}", "{{literal}}"])
    assert render_command(spec) == ["x", str(spec.results_file), "--d=0", "0", "3", str(spec.worktree),
                                    str(spec.artifact_dir), "{literal}"]


def test_a_manifest_left_running_reads_as_never_finished(tmp_path: Path) -> None:
    data = {"pool": "p", "device": 0, "backend": "cpu", "status": "running", "results_file": None}
    out = outcome_from_manifest(data, tmp_path)
    assert out.status is ShardStatus.FAILED and out.error == "the shard never finished"
    assert read_manifest(tmp_path / "nothing-here") is None
