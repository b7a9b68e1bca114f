"""A full disk that also holds the store: a benchmark fills the disk under its worktree, on the same
file system as the home and the SQLite store. The worktree is removed as soon as the shard ends (which
frees the disk), the night ends in a final state (``failed``, with the reason), nothing is left
``running``. The disk is a real 20 MiB tmpfs (mounting one needs root: the test is skipped, saying
so, without it); the night is a real ``zlops nightly`` subprocess."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_upstream import fault_config, make_upstream, run_status, start_nightly, write_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("the full-disk night mounts a 20 MiB tmpfs, which needs root (mount -t tmpfs)")
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(disk)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_benchmark_that_fills_the_disk_of_the_store_still_ends_the_run_failed(
        tmp_path: Path, small_disk: Path) -> None:
    up, _ = make_upstream(tmp_path / "up")
    home = small_disk / "home"
    cfg = write_config(tmp_path / "zlops.yaml", fault_config(home, up.path, tmp_path / "probe",
                                                             env={"FAULT_MODE": "fill"},
                                                             database=f"sqlite:///{home / 'zlops.db'}"))
    log = tmp_path / "night.log"
    night = start_nightly(cfg, "n1", log=log)
    rc = night.wait(240)
    out = log.read_text()
    assert rc == 1, out[-3000:]
    assert run_status(cfg, "nightly:fake:n1") == "failed", out[-3000:]  # a final state, never "running"
    # the worktree that filled the disk went as soon as its shard ended, before the night's later steps
    freed = out.index("was full when the shard ended; removed the worktree")
    assert freed < out.index("start compare"), out[-3000:]
    assert not any((home / "worktrees" / "fake").iterdir())
    assert "Traceback" not in out
    assert "suite fake: no shard produced results" in out
