"""A killed or terminated ``zlops nightly`` (a real subprocess) never double-books its device, and
its run never stays ``running``.

The fault benchmark detects double booking by itself (tests/fault_upstream.py: a probe flock per
device held for the benchmark's life), independently of zlops' own leases.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from fault_upstream import (
    alive,
    fault_config,
    kill_quietly,
    make_upstream,
    manifest_of,
    overlaps,
    run_status,
    start_nightly,
    wait_gone,
    wait_started,
    write_config,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _setup(tmp_path: Path, sleep_s: float) -> tuple[Path, Path, Path]:
    up, _ = make_upstream(tmp_path / "up")
    probe = tmp_path / "probe"
    cfg = write_config(tmp_path / "zlops.yaml", fault_config(tmp_path / "home", up.path, probe, sleep_s=sleep_s,
                                                             database=f"sqlite:///{tmp_path / 'z.db'}"))
    return cfg, probe, tmp_path / "home"


def _second_night(cfg: Path, log: Path) -> int:
    p2 = start_nightly(cfg, "n2", log=log)
    try:
        return p2.wait(180)
    except subprocess.TimeoutExpired:
        kill_quietly(p2.pid)
        raise


def test_sigkill_leaves_an_orphan_that_the_next_night_neither_overlaps_nor_leaves_running(tmp_path: Path) -> None:
    cfg, probe, home = _setup(tmp_path, sleep_s=20)
    log = tmp_path / "zlops.log"
    p1 = start_nightly(cfg, "n1", log=log)
    orphan = wait_started(probe, proc=p1, log=log)[0]
    try:
        p1.send_signal(signal.SIGKILL)
        p1.wait(10)
        assert alive(orphan), "the orphan benchmark should still be running (its own session)"
        assert run_status(cfg, "nightly:fake:n1") == "running"
        assert _second_night(cfg, log) == 0, log.read_text()[-4000:]
        assert overlaps(probe) == [], "two benchmarks were on the device at once"
        assert not alive(orphan), "the dead run's orphan benchmark was not ended"
        assert run_status(cfg, "nightly:fake:n1") == "interrupted"
        assert run_status(cfg, "nightly:fake:n2") == "done"
        assert "marked interrupted" in log.read_text() and f"ended orphan benchmark process group {orphan}" in \
            log.read_text()
        assert manifest_of(home, "nightly:fake:n1")["benchmark_pid"] == orphan  # artifacts kept
        assert not any((home / "worktrees" / "fake").iterdir()), "the dead run's worktree was not swept"
    finally:
        kill_quietly(orphan)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_a_signal_ends_the_benchmark_group_and_marks_the_run_interrupted(
        tmp_path: Path, sig: signal.Signals, code: int) -> None:
    cfg, probe, home = _setup(tmp_path, sleep_s=60)
    log = tmp_path / "zlops.log"
    p1 = start_nightly(cfg, "n1", log=log)
    bench = wait_started(probe, proc=p1, log=log)[0]
    try:
        p1.send_signal(sig)
        try:
            got = p1.wait(30)
        except subprocess.TimeoutExpired:   # seen once in CI (SIGINT, 2026-12-04): say where zlops stood
            alive = "alive" if not wait_gone(bench, 0) else "gone"
            p1.send_signal(signal.SIGABRT)   # PYTHONFAULTHANDLER: the stacks of zlops' threads go to the log
            try:
                p1.wait(10)
            except subprocess.TimeoutExpired:
                kill_quietly(p1.pid)
            raise AssertionError(f"zlops did not exit 30 s after {sig.name} (benchmark {alive}); its log:\n"
                                 + log.read_text()[-4000:]) from None
        assert got == code, log.read_text()[-4000:]
        assert wait_gone(bench, 5), "the benchmark outlived its interrupted zlops"
        assert run_status(cfg, "nightly:fake:n1") == "interrupted"
        shard = manifest_of(home, "nightly:fake:n1")
        assert shard["status"] == "failed" and shard["error"].startswith("interrupted (")
        assert (Path(shard["results_file"]).parent / "run.log").exists()  # artifacts kept
        assert f"interrupted by {sig.name}" in log.read_text() or sig is signal.SIGINT
    finally:
        kill_quietly(bench)
