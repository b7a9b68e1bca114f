"""Device locks: bounded wait, DeviceBusy naming the owner, release on exit and on holder death."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from zlops.errors import DeviceBusy
from zlops.host.locks import device_lock, holder, lock_path


def test_second_holder_waits_then_raises_naming_the_owner(tmp_path: Path) -> None:
    with device_lock(tmp_path, "cuda", 0, wait_s=0, owner="nightly-run-A") as waited:
        assert waited < 0.5
        start = time.monotonic()
        with pytest.raises(DeviceBusy) as ei, device_lock(tmp_path, "cuda", 0, wait_s=0.6, owner="nightly-run-B"):
            pytest.fail("two holders of one device")
        elapsed = time.monotonic() - start
    assert 0.6 <= elapsed < 3
    msg = str(ei.value)
    assert "cuda:0" in msg and "nightly-run-A" in msg and "waited 0.6 s" in msg
    assert f"pid {os.getpid()}" in msg


def test_wait_zero_fails_at_once(tmp_path: Path) -> None:
    with device_lock(tmp_path, "cpu", 0, wait_s=0, owner="a"):
        start = time.monotonic()
        with pytest.raises(DeviceBusy), device_lock(tmp_path, "cpu", 0, wait_s=0, owner="b"):
            pass
        assert time.monotonic() - start < 0.3


def test_released_lock_can_be_taken_again(tmp_path: Path) -> None:
    with device_lock(tmp_path, "cuda", 1, wait_s=0, owner="first"):
        pass
    with device_lock(tmp_path, "cuda", 1, wait_s=0, owner="second") as waited:
        assert waited < 0.5
        note = holder(tmp_path, "cuda", 1)
        assert note is not None and note["owner"] == "second" and note["pid"] == os.getpid() and note["since"]


def test_lock_is_released_when_the_body_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), device_lock(tmp_path, "cuda", 0, wait_s=0, owner="crashes"):
        raise RuntimeError("benchmark blew up")
    with device_lock(tmp_path, "cuda", 0, wait_s=0, owner="next"):
        pass


def test_waiter_gets_the_device_when_it_frees_in_time(tmp_path: Path) -> None:
    taken = threading.Event()

    def hold() -> None:
        with device_lock(tmp_path, "cuda", 0, wait_s=0, owner="short"):
            taken.set()
            time.sleep(0.4)

    t = threading.Thread(target=hold)
    t.start()
    assert taken.wait(5)
    with device_lock(tmp_path, "cuda", 0, wait_s=5, owner="patient") as waited:
        assert waited >= 0.2
    t.join()


def test_different_devices_and_backends_do_not_conflict(tmp_path: Path) -> None:
    with device_lock(tmp_path, "cuda", 0, wait_s=0, owner="a"), \
            device_lock(tmp_path, "cuda", 1, wait_s=0, owner="b"), \
            device_lock(tmp_path, "ascend", 0, wait_s=0, owner="c"):
        assert {p.name for p in tmp_path.iterdir()} == {"cuda-0.lock", "cuda-1.lock", "ascend-0.lock"}


def test_lock_is_released_when_the_holder_process_dies(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from zlops.host.locks import device_lock\n"
        f"with device_lock(Path({str(tmp_path)!r}), 'cuda', 2, wait_s=0, owner='doomed-run'):\n"
        "    print('locked', flush=True)\n"
        "    time.sleep(120)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        with pytest.raises(DeviceBusy, match="doomed-run") as ei, device_lock(tmp_path, "cuda", 2, wait_s=0,
                                                                              owner="me"):
            pass
        assert f"pid {child.pid}" in str(ei.value)
    finally:
        child.kill()
        child.wait(10)
        if child.stdout is not None:
            child.stdout.close()
    with device_lock(tmp_path, "cuda", 2, wait_s=2, owner="me") as waited:
        assert waited < 1.5
    assert holder(tmp_path, "cuda", 2)["owner"] == "me"  # type: ignore[index]


@pytest.mark.parametrize("backend", ["../etc", "CUDA", "cu da", ""])
def test_lock_path_refuses_odd_backend_names(tmp_path: Path, backend: str) -> None:
    with pytest.raises(ValueError, match="bad backend name"):
        lock_path(tmp_path, backend, 0)


def test_holder_of_a_never_used_device_is_none(tmp_path: Path) -> None:
    assert holder(tmp_path, "cuda", 7) is None
