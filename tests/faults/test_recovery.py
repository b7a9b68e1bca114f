"""A run left ``running`` by a dead zlops is marked interrupted at the next start, its orphan
benchmark is ended, and worktrees of runs no longer running are swept."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from fake_upstream import config_data
from fault_upstream import alive, kill_quietly, wait_gone

from zlops.config.settings import Config, parse_config
from zlops.model import RunRecord, RunStatus
from zlops.run.recovery import owner_dead, owner_meta, recover
from zlops.run.runner import process_start
from zlops.steps.context import open_store, slug

SHA = "0123456789abcdef0123456789abcdef01234567"


def _config(tmp_path: Path) -> Config:
    return parse_config(config_data(tmp_path / "home", tmp_path / "up",
                                    database=f"sqlite:///{tmp_path / 'z.db'}"), source="t.yaml")


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _run(config: Config, label: str, owner: dict[str, object] | None,
         status: RunStatus = RunStatus.RUNNING) -> RunRecord:
    run = RunRecord(run_key=f"nightly:fake:{label}", kind="nightly", suite="fake", sha=SHA, branch="main",
                    status=status, started_at=datetime.now(timezone.utc),
                    meta={"owner": owner} if owner is not None else {})
    open_store(config).upsert_run(run)
    return run


@pytest.mark.timeout(60)
def test_a_dead_owners_run_is_interrupted_and_its_orphan_ended(tmp_path: Path) -> None:
    config = _config(tmp_path)
    host = socket.gethostname()
    dead = _run(config, "dead", {"host": host, "pid": _dead_pid(), "start": None})
    live = _run(config, "live", owner_meta())
    remote = _run(config, "remote", {"host": "another-host", "pid": _dead_pid(), "start": None})
    dag = _run(config, "dag", None)  # an Airflow run: steps are separate processes, no owner
    # a pid reused by another program is not the owner: its start time differs
    reused = _run(config, "reused", {"host": host, "pid": os.getpid(), "start": (process_start(os.getpid()) or 0) - 1})
    orphan = subprocess.Popen(["sleep", "60"], start_new_session=True)
    sampler = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a streaming telemetry tool
    try:
        shard = config.artifacts_dir / "fake" / slug(dead.run_key) / "local" / "0"
        shard.mkdir(parents=True)
        (shard / "manifest.json").write_text(json.dumps({
            "status": "running", "benchmark_pid": orphan.pid, "benchmark_start": process_start(orphan.pid),
            "sampler_pid": sampler.pid, "sampler_start": process_start(sampler.pid)}))
        (shard / "run.log").write_text("half a night\n")
        assert owner_dead(open_store(config).get_run(dead.run_key))  # type: ignore[arg-type]
        got = recover(config)
        orphan.wait(10)
        sampler.wait(10)
        assert not alive(orphan.pid) and not alive(sampler.pid)
        assert got.orphans_ended == [orphan.pid, sampler.pid]
        assert sorted(got.interrupted) == sorted([dead.run_key, reused.run_key])
        store = open_store(config)
        statuses = {r.run_key: r.status for r in store.list_runs()}
        assert statuses == {dead.run_key: RunStatus.INTERRUPTED, reused.run_key: RunStatus.INTERRUPTED,
                            live.run_key: RunStatus.RUNNING, remote.run_key: RunStatus.RUNNING,
                            dag.run_key: RunStatus.RUNNING}
        after = store.get_run(dead.run_key)
        assert after is not None and after.finished_at is not None and "died" in after.meta["interrupted"]["reason"]
        assert (shard / "run.log").read_text() == "half a night\n"  # artifacts are kept
        assert recover(config).interrupted == []  # idempotent
    finally:
        kill_quietly(orphan.pid)
        kill_quietly(sampler.pid)


def test_an_orphan_check_never_kills_a_reused_pid(tmp_path: Path) -> None:
    config = _config(tmp_path)
    dead = _run(config, "dead", {"host": socket.gethostname(), "pid": _dead_pid(), "start": None})
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        shard = config.artifacts_dir / "fake" / slug(dead.run_key) / "local" / "0"
        shard.mkdir(parents=True)
        (shard / "manifest.json").write_text(json.dumps({
            "status": "running", "benchmark_pid": bystander.pid,
            "benchmark_start": (process_start(bystander.pid) or 0) + 12345}))  # another process's start
        assert recover(config).orphans_ended == []
        assert alive(bystander.pid)
    finally:
        kill_quietly(bystander.pid)
        assert wait_gone(bystander.pid) or bystander.wait(5) is not None


def test_stale_worktrees_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    config = _config(tmp_path)
    done = _run(config, "done", None, RunStatus.DONE)
    running = _run(config, "running", None)
    base = config.worktrees_dir / "fake"
    stale = base / f"{SHA[:12]}-{slug(done.run_key)[-8:]}"
    ab_base = base / f"{'f' * 12}-{slug(done.run_key + ':ab-base')[-8:]}"
    live = base / f"{SHA[:12]}-{slug(running.run_key)[-8:]}"
    unknown = base / "abcdefabcdef-12345678"
    for d in (stale, ab_base, live, unknown):
        (d / ".venv").mkdir(parents=True)
    got = recover(config)
    assert sorted(got.worktrees_removed) == sorted([stale, ab_base])
    assert not stale.exists() and not ab_base.exists() and live.exists() and unknown.exists()
