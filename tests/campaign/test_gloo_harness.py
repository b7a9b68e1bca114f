"""The real collectives harness (suites/collectives/bench.py) in a campaign nightly on the gloo backend,
P = 1 and 2 on a 2-"device" cpu pool. Needs a Python with torch: ``$ZLOPS_TORCH_PYTHON``, else the test
interpreter when it has torch, else Debian's ``/usr/bin/python3`` with its ``python3-torch`` package (which
``.ci/run`` installs); skipped (not faked) without one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_upstream import GIT_ENV, git

from zlops.config.settings import parse_config
from zlops.model import ShardStatus, Verdict
from zlops.steps.context import open_store
from zlops.steps.nightly import run_nightly

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _torch_python() -> str | None:
    for py in (os.environ.get("ZLOPS_TORCH_PYTHON"), sys.executable, "/usr/bin/python3"):
        if py and subprocess.run([py, "-c", "import torch.distributed"], capture_output=True).returncode == 0:
            return py
    return None


def test_gloo_campaign_measures_both_stacks_at_p1_and_p2(tmp_path: Path) -> None:
    py = _torch_python()
    if py is None:
        pytest.skip("no Python with torch (set ZLOPS_TORCH_PYTHON)")
    up = tmp_path / "up"
    up.mkdir()
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(up)], check=True, env=GIT_ENV)
    shutil.copy(ROOT / "suites" / "collectives" / "bench.py", up / "bench.py")
    git(up, "add", "-A")
    git(up, "commit", "-q", "-m", "bench")
    config = parse_config({
        "home": str(tmp_path / "home"), "locks_dir": str(tmp_path / "locks"),
        "contention": {"gate": False},  # this test checks the harness, not the host's load
        "pools": {"cpu2": {"backend": "cpu", "devices": [0, 1]}},
        "suites": {"gloo": {
            "repo": str(up), "install": [], "format": "collectives", "pools": ["cpu2"], "timeout_s": 300,
            "command": [py, "bench.py", "--backend", "gloo", "--case", "{case}", "--size", "{size}", "--p", "{p}",
                        "--devices", "{devices}", "--variant", "{variant}", "--stack", "{stack}", "--warmup", "1",
                        "--timed", "3", "--iters", "2", "--out", "{results}"],
            "campaign": {"grid": {"cases": ["allreduce"], "sizes": [65536], "p": [1, 2], "stacks": ["nccl", "ring"]},
                         "ratios": [["nccl", "ring"]]}}},
        "judge": "simple", "device_wait_s": 300})
    night = run_nightly(config, "gloo", run_label="n1")
    lanes = open_store(config).shards(night.run_key)
    assert all(o.status is ShardStatus.OK for o in lanes), [o.error for o in lanes]
    series = {(c.case, c.metric) for c in night.summary.comparisons}
    for p in (1, 2):
        for stack in ("nccl", "ring"):
            assert (f"allreduce/64KiB/p{p}/default/{stack}", "execute_s") in series
    assert ("allreduce/64KiB/default/ring", "efficiency_p2") in series
    assert ("allreduce/64KiB/p2/default", "ratio_nccl_over_ring") in series
    assert {c.verdict for c in night.summary.comparisons} == {Verdict.NEW}
