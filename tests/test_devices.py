"""Idle devices: the rule, the range picked, explicit devices winning, and the bounded wait."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from zlops.backends import get_spec
from zlops.backends.base import DeviceBackend, DeviceInfo
from zlops.backends.parsers.npu_smi import parse_npu_smi
from zlops.errors import BackendUnavailable, DeviceBusy
from zlops.run.devices import describe, find_device, is_idle, pick_idle_range, resolve_devices, wait_until_idle

NPU_910 = Path(__file__).resolve().parent / "data" / "npu-smi" / \
    "ai-server_atlas-800-training-server_model-9010_version-24.1.RC2.txt"


def dev(index: int, used: float | None = 0.0, processes: int | None = 0) -> DeviceInfo:
    return DeviceInfo(index=index, model="m", memory_used_mib=used, memory_total_mib=65536.0, processes=processes)


def pool(busy: Sequence[int], n: int = 8) -> list[DeviceInfo]:
    return [dev(i, 59356.0 if i in busy else 0.0, 1 if i in busy else 0) for i in range(n)]


class StubBackend(DeviceBackend):
    """Returns a scripted sequence of enumerations (the last one repeats)."""

    reports_idleness = True

    def __init__(self, *states: list[DeviceInfo], name: str = "ascend") -> None:
        super().__init__(get_spec(name))
        self.states = list(states)
        self.calls = 0

    def enumerate(self) -> list[DeviceInfo]:
        self.calls += 1
        return self.states[min(self.calls, len(self.states)) - 1]


@pytest.mark.parametrize(("info", "idle"), [
    (dev(0), True), (dev(0, used=1.0), False), (dev(0, processes=1), False),
    (dev(0, used=None), False), (dev(0, processes=None), True),
])
def test_idle_means_no_memory_in_use_and_no_process(info: DeviceInfo, idle: bool) -> None:
    assert is_idle(info) is idle


def test_describe_says_why_a_device_is_busy() -> None:
    assert describe(dev(0)) == "idle"
    assert describe(dev(2, 59356.0, 1)) == "busy: 59356 of 65536 MiB in use, 1 process"
    assert describe(dev(2, 0.0, 4)) == "busy: 4 processes"


@pytest.mark.parametrize(("busy", "expected"), [
    ((), [0, 1, 2, 3]),                 # all idle: capped at 4, lowest start
    ((2, 3), [4, 5, 6, 7]),             # 0-1 (2) loses to 4-7 (4)
    ((1, 6), [2, 3, 4, 5]),             # 0, 2-5, 7
    ((0, 3, 6), [1, 2]),                # runs 1-2 and 4-5 tie: lowest start
    ((0, 1, 2, 3, 4, 5, 6), [7]),
    ((0, 1, 2, 3, 4, 5, 6, 7), []),
    ((4,), [0, 1, 2, 3]),               # 0-3 and 5-7: 4 beats 3
])
def test_pick_idle_range(busy: tuple[int, ...], expected: list[int]) -> None:
    assert pick_idle_range(pool(busy)) == expected


def test_pick_needs_consecutive_indices_not_neighbours_in_the_list() -> None:
    infos = [dev(0), dev(2), dev(3), dev(5)]
    assert pick_idle_range(infos) == [2, 3]
    assert pick_idle_range(pool(()), max_len=2) == [0, 1]
    with pytest.raises(ValueError, match="max_len"):
        pick_idle_range(infos, max_len=0)


def test_real_910_sample_has_no_idle_npu_because_every_one_has_processes() -> None:
    # HBM-Usage is 0 on all eight, but the process table lists 4 processes on each
    infos = parse_npu_smi(NPU_910.read_text())
    assert all(i.memory_used_mib == 0 for i in infos)
    assert pick_idle_range(infos) == []


def test_explicit_devices_always_win_without_enumerating() -> None:
    backend = StubBackend(pool((0, 1, 2, 3, 4, 5, 6, 7)))
    assert resolve_devices(backend, [6, 7]) == [6, 7]
    assert backend.calls == 0


def test_auto_devices_are_the_idle_range() -> None:
    assert resolve_devices(StubBackend(pool((2, 3))), None) == [4, 5, 6, 7]
    assert resolve_devices(StubBackend(pool((2, 3))), []) == [4, 5, 6, 7]


def test_none_idle_is_a_clear_error_naming_every_device() -> None:
    with pytest.raises(DeviceBusy) as ei:
        resolve_devices(StubBackend(pool((0, 1), n=2)), None)
    msg = str(ei.value)
    assert "no idle ascend device" in msg and "name the devices to use explicitly" in msg
    assert "0: busy: 59356 of 65536 MiB in use, 1 process" in msg
    with pytest.raises(BackendUnavailable, match="reports no devices"):
        resolve_devices(StubBackend([]), None)


def test_a_backend_without_idleness_auto_selects_what_it_lists() -> None:
    backend = StubBackend([dev(0, used=1234.0)], name="cpu")
    backend.reports_idleness = False
    assert resolve_devices(backend, None) == [0]
    assert wait_until_idle(backend, 0, timeout_s=0, poll_s=1) is True


def test_wait_until_idle_polls_until_the_device_frees() -> None:
    backend = StubBackend(pool((1,)), pool((1,)), pool(()))
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    assert wait_until_idle(backend, 1, timeout_s=10, poll_s=2, clock=lambda: now[0], sleep=sleep) is True
    assert backend.calls == 3 and slept == [2, 2]


def test_wait_until_idle_gives_up_at_the_timeout() -> None:
    backend = StubBackend(pool((1,)))
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    assert wait_until_idle(backend, 1, timeout_s=5, poll_s=2, clock=lambda: now[0], sleep=sleep) is False
    assert now[0] == 5 and backend.calls == 4  # at 0, 2, 4, 5
    assert wait_until_idle(StubBackend(pool((1,))), 1, timeout_s=0, poll_s=2) is False  # checks once


def test_an_unknown_device_is_an_error_not_a_wait() -> None:
    with pytest.raises(BackendUnavailable, match=r"device 9 is not on this host \(devices: \[0, 1\]\)"):
        find_device(StubBackend(pool((), n=2)), 9)
