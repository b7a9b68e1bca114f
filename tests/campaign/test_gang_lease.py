"""Gang leases with real processes: all devices or none, one order, never two holders of a device."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from zlops.errors import DeviceBusy
from zlops.host.locks import device_lease, gang_lease, lock_path

HOLDER = textwrap.dedent('''
    import json, sys, time
    from pathlib import Path
    from zlops.host.locks import device_lease, gang_lease
    locks, devices, hold_s, log, tag = Path(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
    for i in range(int(sys.argv[6])):
        cm = gang_lease(locks, "cpu", devices, wait_s=60, owner=tag) if len(devices) > 1 else \\
            device_lease(locks, "cpu", devices[0], wait_s=60, owner=tag)
        with cm:
            t0 = time.time()
            time.sleep(hold_s)
            t1 = time.time()
        with open(log, "a") as fh:
            fh.write(json.dumps({"tag": tag, "devices": devices, "t0": t0, "t1": t1}) + "\\n")
''')


def _spawn(tmp_path: Path, devices: list[int], tag: str, *, hold_s: float = 0.05, times: int = 1) -> subprocess.Popen:  # type: ignore[type-arg]
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "locks"), json.dumps(devices), str(hold_s),
                             str(tmp_path / "holds.jsonl"), tag, str(times)])


def test_overlapping_gangs_and_single_device_holders_never_share_a_device(tmp_path: Path) -> None:
    """Gangs {0,1}, {1,2}, {2,3} (given in mixed order) and single holders of 1 and 2, all at once,
    several times each: every device is held by one process at a time, and every process finished
    (no deadlock)."""
    procs = [_spawn(tmp_path, [1, 0], "g01", times=6), _spawn(tmp_path, [2, 1], "g12", times=6),
             _spawn(tmp_path, [3, 2], "g23", times=6), _spawn(tmp_path, [1], "s1", times=8),
             _spawn(tmp_path, [2], "s2", times=8)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    holds = [json.loads(line) for line in (tmp_path / "holds.jsonl").read_text().splitlines()]
    assert len(holds) == 6 * 3 + 8 * 2
    for d in range(4):
        mine = sorted((h for h in holds if d in h["devices"]), key=lambda h: h["t0"])
        for a, b in zip(mine, mine[1:]):
            assert a["t1"] <= b["t0"], f"device {d} held by {a['tag']} and {b['tag']} at once"


@pytest.mark.slow  # real processes, one holding a device for 3 s while the gang waits (~3.5 s)
def test_a_waiting_gang_holds_none_of_its_devices(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    holder = _spawn(tmp_path, [1], "s1", hold_s=3.0)
    time.sleep(0.8)  # s1 holds device 1
    gang = _spawn(tmp_path, [0, 1], "g01")
    time.sleep(1.0)  # the gang is waiting for device 1 now
    fd = os.open(lock_path(locks, "cpu", 0), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # device 0 is free: the waiting gang keeps no part of it
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    assert holder.wait(timeout=30) == 0 and gang.wait(timeout=30) == 0
    holds = {h["tag"]: h for h in map(json.loads, (tmp_path / "holds.jsonl").read_text().splitlines())}
    assert holds["g01"]["t0"] >= holds["s1"]["t1"]


def test_busy_gang_names_the_holder_and_releases_everything(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    with device_lease(locks, "cpu", 2, wait_s=0, owner="nightly:x"), \
            pytest.raises(DeviceBusy, match=r"device cpu:2 of the gang \[1, 2\] .*owner nightly:x.*holding none"):
        with gang_lease(locks, "cpu", [2, 1], wait_s=0.2, owner="campaign"):
            pass
    with gang_lease(locks, "cpu", [1, 2], wait_s=0, owner="campaign") as g:  # nothing was left held
        assert [p.name for p in g.paths] == ["cpu-1.lock", "cpu-2.lock"]
        note = json.loads(lock_path(locks, "cpu", 1).read_text())
        assert note["gang"] == [1, 2] and note["owner"] == "campaign"
    with pytest.raises(ValueError, match="distinct"):
        with gang_lease(locks, "cpu", [1, 1], wait_s=0, owner="x"):
            pass
