"""Host-wide device leases: never two benchmark processes on one device, whoever started them.

Airflow pools (one slot per device) are the first guard; this lease is the second, and the only one
when the CLI and a DAG (or two DAG runs, or two configs with different homes) share a host. A lease
is an ``flock`` on ``<locks_dir>/<backend>-<device>.lock``; the benchmark inherits the lock's file
descriptor (:attr:`Lease.fd`), so the lease lives exactly as long as the benchmark does: a zlops
killed with SIGKILL leaves its benchmark running *and* the device leased, and the next run waits.
zlops never unlocks a lease explicitly: it only closes its own fd, and the kernel drops the lock
when the last holder of the open file closes it. So a benchmark that left a detached worker
behind (a daemonized child that inherited the fd) keeps the device leased until that worker ends;
the lease's note names it (:func:`detached_holders`) and the next night waiting for the device
says so. A crash never leaves a device locked.

``locks_dir`` is host-wide (:func:`default_locks_dir`), never under a config's home: two homes on
one host share their devices.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from zlops.errors import DeviceBusy

log = logging.getLogger(__name__)

POLL_S = 0.5
#: the host-wide leases directory when it can be used; else a per-user one under the temp dir
SYSTEM_LOCKS_DIR = Path("/var/lock/zlops")
LOCKS_DIR_ENV = "ZLOPS_LOCKS_DIR"


def default_locks_dir() -> Path:
    """Where device leases live when the config names no ``locks_dir``.

    ``$ZLOPS_LOCKS_DIR`` when set; else ``/var/lock/zlops`` when it exists or can be created and is
    writable (created sticky and world-writable, like /tmp, so every user's zlops shares it); else
    ``<tmp>/zlops-locks-<uid>``, shared only by one user's zlops processes.
    """
    env = os.environ.get(LOCKS_DIR_ENV)
    if env:
        return Path(env).expanduser().absolute()
    try:
        if not SYSTEM_LOCKS_DIR.is_dir():
            SYSTEM_LOCKS_DIR.mkdir(parents=False)
            os.chmod(SYSTEM_LOCKS_DIR, 0o1777)
        if os.access(SYSTEM_LOCKS_DIR, os.W_OK | os.X_OK):
            return SYSTEM_LOCKS_DIR
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / f"zlops-locks-{os.getuid()}"


def lock_path(locks_dir: Path, backend: str, device: int) -> Path:
    if not re.fullmatch(r"[a-z0-9]+", backend):
        raise ValueError(f"bad backend name for a lock: {backend!r}")
    return locks_dir / f"{backend}-{int(device)}.lock"


def detached_holders(path: Path, fd: int) -> list[dict[str, Any]]:
    """Processes other than this one that share the lock held through ``fd`` on ``path``: their copy
    of the fd (inherited from the benchmark) carries the ``flock`` (``lock:`` in ``/proc/<pid>/fdinfo``).
    A process that merely has the file open (another zlops waiting for the device) holds no lock
    through it and is not listed. Linux only; ``[]`` elsewhere. Each: ``{pid, cmd}``."""
    target = os.fstat(fd)
    me = os.getpid()
    out: list[dict[str, Any]] = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
    except OSError:
        return out
    name = str(path)
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for n in fds:
            try:
                if os.readlink(f"{fd_dir}/{n}") != name:
                    continue
                st = os.stat(f"{fd_dir}/{n}")
                if (st.st_dev, st.st_ino) != (target.st_dev, target.st_ino):
                    continue
                with open(f"/proc/{pid}/fdinfo/{n}", encoding="utf-8") as fh:
                    if not any(line.startswith("lock:") for line in fh):
                        continue
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            out.append({"pid": pid, "cmd": cmd[:300]})
            break
    return out


def _holder_words(who: dict[str, Any]) -> str:
    bench = f", benchmark pid {who['benchmark_pid']}" if who.get("benchmark_pid") else ""
    left = who.get("detached") or []
    detached = ("; its benchmark left detached process(es) holding the lease: " + ", ".join(
        f"pid {d.get('pid')} ({d.get('cmd', '?')[:80]})" for d in left if isinstance(d, dict))) if left else ""
    return (f"owner {who.get('owner', '?')}, pid {who.get('pid', '?')}{bench}, since {who.get('since', '?')}"
            f"{detached}")


def _release(lease: Lease) -> None:
    """Give up this process's hold on a lease: never an explicit unlock (which would free the device
    under a detached worker that inherited the fd), only a close; the kernel drops the lock when the
    last holder closes. A detached holder is written into the lease's note and logged."""
    try:
        left = detached_holders(lease.path, lease.fd)
    except OSError:
        left = []
    if left:
        lease.update(detached=left)
        log.warning("device lease %s is still held by process(es) the benchmark left behind: %s; the device "
                    "stays leased until they end", lease.path,
                    ", ".join(f"pid {d['pid']} ({d['cmd'][:120]})" for d in left))
    lease.detached = left


def holder(locks_dir: Path, backend: str, device: int) -> dict[str, object] | None:
    """Who holds (or last held) the device lock, from the note the holder wrote."""
    path = lock_path(locks_dir, backend, device)
    try:
        text = path.read_text(encoding="utf-8").strip()
        return json.loads(text) if text else None
    except (OSError, ValueError):
        return None


@dataclass
class Lease:
    """A held device lease. ``fd`` is the locked file: pass it to the benchmark (``pass_fds``) so
    the lease outlives zlops if zlops dies first."""

    path: Path
    fd: int
    waited: float
    note: dict[str, Any]
    #: processes the benchmark left holding the lease when this process let go of it (:func:`_release`)
    detached: list[dict[str, Any]] = field(default_factory=list)

    def update(self, **fields: Any) -> None:
        """Add to the holder's note (e.g. the benchmark's pid, which an orphan check reads)."""
        self.note.update(fields)
        data = json.dumps(self.note).encode()
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, data, 0)
        except OSError:  # a full disk loses the note, never the lease
            pass


def _open_lock(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is not a regular file")
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) != 0o666:
            os.fchmod(fd, 0o666)  # another user's zlops on this host must be able to take it too
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def device_lock(locks_dir: Path, backend: str, device: int, *, wait_s: float, owner: str) -> Iterator[float]:
    """Hold the lock of one device; waits up to ``wait_s`` seconds, then raises DeviceBusy.

    Yields the seconds spent waiting. :func:`device_lease` is the same with the lease itself.
    """
    with device_lease(locks_dir, backend, device, wait_s=wait_s, owner=owner) as lease:
        yield lease.waited


@contextlib.contextmanager
def device_lease(locks_dir: Path, backend: str, device: int, *, wait_s: float, owner: str) -> Iterator[Lease]:
    """Lease one device; waits up to ``wait_s`` seconds, then raises DeviceBusy naming the holder.

    The lease is released when the block ends, or, when its fd was passed to a benchmark that is
    still running (zlops was killed), when that benchmark ends.
    """
    path = lock_path(locks_dir, backend, device)
    fd = _open_lock(path)
    start = time.monotonic()
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - start >= wait_s:
                    who = holder(locks_dir, backend, device) or {}
                    raise DeviceBusy(f"device {backend}:{device} is held by another benchmark "
                                     f"({_holder_words(who)}); waited {wait_s:g} s") from None
                time.sleep(min(POLL_S, max(0.01, wait_s / 10)))
        lease = Lease(path, fd, time.monotonic() - start, {})
        lease.update(owner=owner, pid=os.getpid(), host=socket.gethostname(),
                     since=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        try:
            yield lease
        finally:
            _release(lease)  # no LOCK_UN: the last holder's close frees the device
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


@dataclass
class GangLease:
    """The leases of every device of a gang shard, held together. ``fds`` go to the benchmark
    (``pass_fds``), so the whole gang stays leased for as long as the benchmark lives."""

    leases: tuple[Lease, ...]
    waited: float

    @property
    def fds(self) -> tuple[int, ...]:
        return tuple(lease.fd for lease in self.leases)

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(lease.path for lease in self.leases)

    def update(self, **fields: Any) -> None:
        for lease in self.leases:
            lease.update(**fields)


@contextlib.contextmanager
def gang_lease(locks_dir: Path, backend: str, devices: list[int] | tuple[int, ...], *, wait_s: float,
               owner: str) -> Iterator[GangLease]:
    """Lease ALL of ``devices`` at once, or none: the locks are tried in ascending device order
    without blocking; when one is held elsewhere, those already taken are released at once and the
    whole gang is tried again (every ``POLL_S``) until ``wait_s`` has passed, then DeviceBusy names
    the holder. So a waiting gang never holds part of its devices (no deadlock between two gangs,
    nor between a gang and single-device shards), and everyone takes locks in one order.

    The locks are the same files as :func:`device_lease`'s: a one-device nightly and a gang exclude
    each other device by device.
    """
    order = sorted({int(d) for d in devices})
    if len(order) != len(devices) or not order:
        raise ValueError(f"gang_lease: expected distinct devices, got {list(devices)}")
    fds = {d: _open_lock(lock_path(locks_dir, backend, d)) for d in order}
    start = time.monotonic()
    held: list[int] = []
    try:
        while True:
            blocked = None
            for d in order:
                try:
                    fcntl.flock(fds[d], fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held.append(d)
                except BlockingIOError:
                    blocked = d
                    break
            if blocked is None:
                break
            for d in reversed(held):  # never keep part of a gang while waiting for the rest
                fcntl.flock(fds[d], fcntl.LOCK_UN)
            held.clear()
            if time.monotonic() - start >= wait_s:
                who = holder(locks_dir, backend, blocked) or {}
                raise DeviceBusy(
                    f"device {backend}:{blocked} of the gang {order} is held by another benchmark "
                    f"({_holder_words(who)}); waited {wait_s:g} s, holding none of the gang meanwhile") from None
            time.sleep(min(POLL_S, max(0.01, wait_s / 10)))
        waited = time.monotonic() - start
        leases = tuple(Lease(lock_path(locks_dir, backend, d), fds[d], waited, {}) for d in order)
        gang = GangLease(leases, waited)
        gang.update(owner=owner, pid=os.getpid(), host=socket.gethostname(), gang=order,
                    since=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        try:
            yield gang
        finally:
            for lease in leases:  # no LOCK_UN: the last holder's close frees each device
                _release(lease)
    finally:
        for fd in fds.values():
            os.close(fd)
