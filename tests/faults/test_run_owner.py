"""A run id is owned by one live process: a second ``zlops nightly`` of a running run id is refused in one
line naming the owner, and takes the run over only once the owner is dead (zlops.run.recovery decides).
Real ``zlops nightly`` subprocesses, a real SIGKILL."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from fault_upstream import (
    events,
    fault_config,
    kill_quietly,
    make_upstream,
    overlaps,
    run_status,
    start_nightly,
    wait_started,
    write_config,
)

from zlops.config.settings import load_config
from zlops.errors import RunOwned
from zlops.steps.fetch import fetch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_a_second_nightly_of_a_running_run_id_is_refused_until_its_owner_dies(tmp_path: Path) -> None:
    up, _ = make_upstream(tmp_path / "up")
    probe = tmp_path / "probe"
    cfg = write_config(tmp_path / "zlops.yaml", fault_config(tmp_path / "home", up.path, probe, sleep_s=30,
                                                             database=f"sqlite:///{tmp_path / 'z.db'}"))
    log = tmp_path / "zlops.log"
    owner = start_nightly(cfg, "n1", log=log)
    bench = wait_started(probe, proc=owner, log=log)[0]
    try:
        t0 = time.monotonic()
        second_log = tmp_path / "second.log"
        second = start_nightly(cfg, "n1", log=second_log)
        assert second.wait(60) == 2
        assert time.monotonic() - t0 < 30  # refused at once, not after the owner's night
        lines = [line for line in second_log.read_text().splitlines() if line.startswith("zlops:")]
        assert len(lines) == 1, second_log.read_text()
        assert lines[0].startswith("zlops: refused: run nightly:fake:n1 is being run by "
                                   f"pid {owner.pid} on host {socket.gethostname()}, since 20"), lines[0]
        # an Airflow task of the same run (fetch without an owner) is refused too, by the run's meta
        with pytest.raises(RunOwned, match=f"pid {owner.pid} on host"):
            fetch(load_config(cfg), "fake", run_key="nightly:fake:n1")
        assert [kind for kind, *_ in events(probe)].count("start") == 1  # the benchmark ran once
        assert run_status(cfg, "nightly:fake:n1") == "running"

        owner.send_signal(signal.SIGKILL)  # the owner dies: the next start takes the run over
        owner.wait(10)
        third = start_nightly(cfg, "n1", log=log, extra=())
        try:
            assert third.wait(180) in (0, 5), log.read_text()[-3000:]
        except subprocess.TimeoutExpired:
            kill_quietly(third.pid)
            raise
        assert run_status(cfg, "nightly:fake:n1") == "done"
        assert overlaps(probe) == []  # the dead owner's orphan benchmark was ended first, never overlapped
        assert f"ended orphan benchmark process group {bench}" in log.read_text()
    finally:
        kill_quietly(bench)
        kill_quietly(owner.pid)
