"""Host-local device locks: never two benchmark processes on one device, whoever started them.

Airflow pools (one slot per device) are the first guard; this lock is the second, and the only one
when the CLI and a DAG (or two DAG runs on two workers) share a host. ``flock`` is released by the
kernel when the holder dies, so a crashed run never leaves a device locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from zlops.errors import DeviceBusy

POLL_S = 0.5


def lock_path(locks_dir: Path, backend: str, device: int) -> Path:
    if not re.fullmatch(r"[a-z0-9]+", backend):
        raise ValueError(f"bad backend name for a lock: {backend!r}")
    return locks_dir / f"{backend}-{int(device)}.lock"


def holder(locks_dir: Path, backend: str, device: int) -> dict[str, object] | None:
    """Who holds (or last held) the device lock, from the note the holder wrote."""
    path = lock_path(locks_dir, backend, device)
    try:
        text = path.read_text(encoding="utf-8").strip()
        return json.loads(text) if text else None
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def device_lock(locks_dir: Path, backend: str, device: int, *, wait_s: float, owner: str) -> Iterator[float]:
    """Hold the lock of one device; waits up to ``wait_s`` seconds, then raises DeviceBusy.

    Yields the seconds spent waiting.
    """
    path = lock_path(locks_dir, backend, device)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    start = time.monotonic()
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - start >= wait_s:
                    who = holder(locks_dir, backend, device) or {}
                    raise DeviceBusy(
                        f"device {backend}:{device} is held by another benchmark "
                        f"(owner {who.get('owner', '?')}, pid {who.get('pid', '?')}, since {who.get('since', '?')}); "
                        f"waited {wait_s:g} s") from None
                time.sleep(POLL_S)
        waited = time.monotonic() - start
        note = {"owner": owner, "pid": os.getpid(), "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(note).encode(), 0)
        try:
            yield waited
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def host_lock(path: Path) -> Iterator[None]:
    """Serialize a step among the processes of one host (blocking ``flock``; released on death).

    Two device tasks of one run on a fresh host both prepare the run's worktree and venv; without
    this the second would rebuild them under the first one's benchmark.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
