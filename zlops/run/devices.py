"""Idle devices: which are free, which range to use when a pool does not name its devices, and a
bounded wait for one device to become free.

The rule comes from the simpler benchmark skill (harness-formats.md 1.5, seeds/000 Step 2): an idle
device has **no device memory in use** (HBM-Usage on Ascend) **and no process** on it; auto-selection
takes the **longest run of consecutive idle indices, at most 4**; when none is idle the user must
name devices. A backend whose tool does not report processes (rocm-smi) is judged on memory alone;
one without a notion of idleness (cpu) is never waited for and auto-selects every device it lists.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from zlops.backends.base import DeviceBackend, DeviceInfo
from zlops.errors import BackendUnavailable, DeviceBusy

log = logging.getLogger(__name__)

MAX_AUTO_DEVICES = 4


def is_idle(info: DeviceInfo) -> bool:
    """No device memory in use (unknown memory is not idle) and no process (unknown counts as none)."""
    return info.memory_used_mib is not None and info.memory_used_mib == 0 and not info.processes


def describe(info: DeviceInfo) -> str:
    """``idle``, or why not: ``busy: 59356 of 65536 MiB in use, 1 process``."""
    if is_idle(info):
        return "idle"
    why = []
    if info.memory_used_mib is None:
        why.append("memory in use not reported")
    elif info.memory_used_mib:
        total = f" of {info.memory_total_mib:g}" if info.memory_total_mib is not None else ""
        why.append(f"{info.memory_used_mib:g}{total} MiB in use")
    if info.processes:
        why.append(f"{info.processes} process{'es' if info.processes != 1 else ''}")
    return "busy: " + ", ".join(why)


def pick_idle_range(infos: Sequence[DeviceInfo], *, max_len: int = MAX_AUTO_DEVICES) -> list[int]:
    """The longest run of consecutive idle indices, cut to ``max_len``; ties go to the lowest start.

    Runs are cut before they are compared, so with ``max_len=4`` a run 0-3 and a run 5-10 tie and
    0-3 wins. An empty list means no device is idle.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    idle = sorted({i.index for i in infos if is_idle(i)})
    best: list[int] = []
    run: list[int] = []
    for index in idle:
        run = [*run, index] if run and index == run[-1] + 1 else [index]
        if len(run[:max_len]) > len(best):
            best = run[:max_len]
    return best


def resolve_devices(backend: DeviceBackend, explicit: Sequence[int] | None, *,
                    max_len: int = MAX_AUTO_DEVICES) -> list[int]:
    """The devices to run on: ``explicit`` whenever it names any (never second-guessed); otherwise
    the backend's devices are enumerated and :func:`pick_idle_range` chooses.

    Raises :class:`DeviceBusy` naming every device's state when none is idle, and
    :class:`BackendUnavailable` when the backend's tool cannot enumerate.
    """
    if explicit:
        return [int(d) for d in explicit]
    infos = backend.enumerate()
    if not infos:
        raise BackendUnavailable(f"backend {backend.name} reports no devices on this host; name devices explicitly")
    if not backend.reports_idleness:
        return sorted(i.index for i in infos)[:max_len]
    picked = pick_idle_range(infos, max_len=max_len)
    if not picked:
        states = "; ".join(f"{i.index}: {describe(i)}" for i in sorted(infos, key=lambda i: i.index))
        raise DeviceBusy(f"no idle {backend.name} device to pick automatically ({states}); "
                         "name the devices to use explicitly (a pool's devices, or --devices)")
    return picked


def find_device(backend: DeviceBackend, device: int) -> DeviceInfo:
    """The current state of one device; :class:`BackendUnavailable` when the backend does not list it."""
    infos = backend.enumerate()
    for info in infos:
        if info.index == device:
            return info
    raise BackendUnavailable(f"{backend.name} device {device} is not on this host "
                             f"(devices: {sorted(i.index for i in infos)})")


def wait_until_idle(backend: DeviceBackend, device: int, *, timeout_s: float, poll_s: float,
                    clock: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep) -> bool:
    """Poll ``device`` until it is idle (True) or ``timeout_s`` has passed (False).

    Checks at least once even with ``timeout_s=0``. A backend without a notion of idleness is
    idle at once. Enumeration errors propagate (the caller decides whether that blocks a run).
    """
    if not backend.reports_idleness:
        return True
    deadline = clock() + max(0.0, timeout_s)
    while True:
        info = find_device(backend, device)
        if is_idle(info):
            return True
        remaining = deadline - clock()
        if remaining <= 0:
            log.info("%s device %d still %s after %.3g s", backend.name, device, describe(info), timeout_s)
            return False
        sleep(min(max(poll_s, 0.01), remaining))


__all__ = ["MAX_AUTO_DEVICES", "describe", "find_device", "is_idle", "pick_idle_range", "resolve_devices",
           "wait_until_idle"]
