"""proc.interrupt_all ends every process group zlops started, from any thread, and refuses new ones."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from fault_upstream import alive

from zlops.errors import ProcessError
from zlops.host import proc


@pytest.fixture(autouse=True)
def _clear() -> None:
    yield
    proc.clear_interrupt()


@pytest.mark.timeout(30)
def test_interrupt_ends_groups_started_in_other_threads_and_refuses_new_ones(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = ("import os, subprocess, sys, time\n"
              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              f"open({str(pidfile)!r}, 'w').write(str(c.pid))\n"
              "time.sleep(60)\n")
    done: list[proc.Completed] = []
    worker = threading.Thread(target=lambda: done.append(proc.run([sys.executable, "-c", script], check=False)))
    start = time.monotonic()
    worker.start()
    while not pidfile.exists() or not pidfile.read_text():
        time.sleep(0.02)
    assert proc.interrupt_all("SIGTERM") == 1
    worker.join(10)
    assert done and done[0].returncode is not None and done[0].returncode < 0
    assert time.monotonic() - start < 10
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(grandchild), "a worker of the benchmark outlived the interrupt"
    assert proc.interrupted() == "SIGTERM"
    with pytest.raises(ProcessError, match=r"not started: zlops is stopping \(SIGTERM\)"):
        proc.run(["true"])
    with pytest.raises(ProcessError, match="not started"):
        proc.spawn(["true"])
    proc.clear_interrupt()
    assert proc.run(["true"]).ok
