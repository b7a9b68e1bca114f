"""Shard specs on the fault benchmark (tests/fault_upstream.py), run in-process with run_shard."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_upstream import BENCH, TIMINGS

from zlops.config.settings import SuiteConfig
from zlops.run.runner import ShardSpec

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def shard_spec(tmp_path: Path) -> Callable[..., ShardSpec]:
    """``shard_spec(name, device=0, sleep_s=0, mode="", **suite_fields)``: a spec whose worktree holds
    the fault benchmark and whose venv is this interpreter's (no install step)."""
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    (worktree / "bench.py").write_text(BENCH)
    (worktree / "timings.json").write_text(json.dumps(TIMINGS))
    probe = tmp_path / "probe"
    probe.mkdir()

    def make(name: str = "run", *, device: int = 0, sleep_s: float = 0, mode: str = "", **fields: object) -> ShardSpec:
        suite = SuiteConfig(repo=str(tmp_path / "upstream"), format="zlops-json", pools=["p"], rounds=3,
                            env={"FAULT_PROBE": str(probe), "FAULT_SLEEP_S": str(sleep_s), "FAULT_MODE": mode},
                            command=["python", "bench.py", "--out", "{results}", "--device", "{device}",
                                     "--rounds", "{rounds}"], **fields)  # type: ignore[arg-type]
        return ShardSpec(run_key=f"nightly:fake:{name}", suite_name="fake", suite=suite, sha=SHA, pool="p",
                         backend="cpu", device=device, worktree=worktree, venv=Path(sys.prefix),
                         artifact_dir=tmp_path / "artifacts" / name / "p" / str(device))

    return make


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    return tmp_path / "probe"
