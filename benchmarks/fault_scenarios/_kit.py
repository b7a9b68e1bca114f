"""Shared by the scenario modules: the fault upstream (tests/fault_upstream.py), a night as a real
``zlops nightly`` subprocess, and counts read straight from the store's tables."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))

import sqlalchemy as sa  # noqa: E402
from fault_upstream import (  # noqa: E402,F401  (re-exported for the scenario modules)
    TIMINGS,
    alive,
    fault_config,
    kill_quietly,
    make_upstream,
    overlaps,
    start_nightly,
    wait_gone,
    wait_started,
    write_config,
)

CASES = len(TIMINGS)  # one metric per case


@dataclass
class Night:
    """A ``zlops nightly`` subprocess that ran to its end (or was killed at ``timeout_s``)."""

    returncode: int | None
    seconds: float
    output: str


def setup(work: Path, *, devices: tuple[int, ...] = (0,), sleep_s: float = 0, name: str = "a",
          **extra: Any) -> tuple[Path, Path, Path]:
    """(config path, probe folder, home) of a fresh home under ``work`` on a fresh fault upstream."""
    up = work / "up"
    if not up.exists():
        make_upstream(up)
    probe = work / "probe"
    home = work / f"home-{name}"
    data = fault_config(home, up, probe, devices=devices, sleep_s=sleep_s,
                        database=f"sqlite:///{work / f'{name}.db'}", **extra)
    backend = os.environ.get("ZLOPS_FAULTS_BACKEND", "cpu")
    if backend != "cpu":  # a GPU host: real device pinning, idle checks, a streaming telemetry sampler
        data["pools"]["local"]["backend"] = backend
        suite = data["suites"]["fake"]
        suite.update(install=[], system_site_packages=True)  # torch from the host; the bench needs no install
        suite["env"]["FAULT_GPU"] = "1"
    return write_config(work / f"zlops-{name}.yaml", data), probe, home


def with_sleep(cfg: Path, sleep_s: float) -> Path:
    """A copy of ``cfg`` (same home, same store) whose benchmark runs ``sleep_s`` seconds."""
    import yaml

    data = yaml.safe_load(cfg.read_text())
    data["suites"]["fake"]["env"]["FAULT_SLEEP_S"] = str(sleep_s)
    out = cfg.with_name(f"{cfg.stem}-sleep{sleep_s:g}.yaml")
    out.write_text(yaml.safe_dump(data))
    return out


def night(cfg: Path, run_id: str, log: Path, *, timeout_s: float = 240, env: dict[str, str] | None = None) -> Night:
    """Run one night to its end; a night past ``timeout_s`` is killed (a hang: not survived)."""
    start = time.monotonic()
    if env:
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
    try:
        p = start_nightly(cfg, run_id, log=log)
    finally:
        if env:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    try:
        rc: int | None = p.wait(timeout_s)
    except subprocess.TimeoutExpired:
        kill_quietly(p.pid)
        p.wait(10)
        rc = None
    return Night(rc, time.monotonic() - start, log.read_text(errors="replace") if log.exists() else "")


def db_url(work: Path, name: str = "a") -> str:
    return f"sqlite:///{work / f'{name}.db'}"


def counts(url: str, run_key: str) -> dict[str, Any]:
    """Stored measurements, duplicate rows and statuses of one run, by plain SQL."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            try:
                run = c.execute(sa.text("SELECT id, status FROM runs WHERE run_key = :k"), {"k": run_key}).first()
            except sa.exc.OperationalError:  # no store yet: zlops stopped before creating it
                run = None
            if run is None:
                return {"status": None, "results": 0, "duplicates": 0, "shards": {}}
            results = c.execute(sa.text("SELECT COUNT(*) FROM results r JOIN shards s ON r.shard_id = s.id "
                                        "WHERE s.run_id = :r"), {"r": run.id}).scalar_one()
            dup_results = c.execute(sa.text(
                "SELECT COUNT(*) FROM (SELECT r.shard_id FROM results r JOIN shards s ON r.shard_id = s.id "
                "WHERE s.run_id = :r GROUP BY r.shard_id, r.\"case\", r.metric HAVING COUNT(*) > 1) d"),
                {"r": run.id}).scalar_one()
            dup_shards = c.execute(sa.text(
                "SELECT COUNT(*) FROM (SELECT pool FROM shards WHERE run_id = :r GROUP BY pool, device "
                "HAVING COUNT(*) > 1) d"), {"r": run.id}).scalar_one()
            shards = {(row.pool, row.device): (row.status, row.error or "") for row in c.execute(
                sa.text("SELECT pool, device, status, error FROM shards WHERE run_id = :r"), {"r": run.id})}
    finally:
        engine.dispose()
    return {"status": run.status, "results": results, "duplicates": dup_results + dup_shards, "shards": shards}
