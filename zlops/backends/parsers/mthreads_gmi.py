"""Parse Moore Threads ``mthreads-gmi``: the default table (enumeration) and ``--json`` (telemetry).

The default table is a real capture (``tests/data/mthreads-gmi/``, mthreads-gmi 1.14.0, MTT S80)::

    ID   Name           |PCIe                |%GPU  Mem
         Device Type    |Pcie Lane Width     |Temp  MPC Capable
    +-------------------------------------------------------------+
    0    MTT S80        |00000000:01:00.0    |98%   1339MiB(16384MiB)
         Physical       |16x(16x)            |56C   YES

Memory is ``used MiB(total MiB)``; a ``Processes:`` table follows with one row per process.

``--json``: NO real output of it was found. The parser follows the description of the campaign
that used it (seeds/003): values carry their unit glued on (``"36C"``, ``"1888MHz"``,
``"477.68W"``) and the power key is ``"Power Draw "`` with a trailing space. The key layout
beyond that is unknown, so the parser does not depend on nesting: it flattens each device object
to ``(path, value)`` pairs, strips and lower-cases keys, and picks values by key name and the
names of the sections above them (nvidia-smi ``-q`` style: ``Clocks/Graphics``, ``Utilization/Gpu``,
``FB Memory Usage/Used``). Re-check it on the first real capture.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from zlops.backends.base import DeviceInfo
from zlops.backends.parsers import mib, number
from zlops.host.telemetry import TelemetrySample

_DEVICE_ROW = re.compile(r"^(\d+)\s+(.+?)\s*\|\s*(\S+)\s*\|(.*)$")
_MEM = re.compile(r"(\d+(?:\.\d+)?)\s*(MiB|GiB|MB|GB)\s*\(\s*(\d+(?:\.\d+)?)\s*(MiB|GiB|MB|GB)\s*\)")
_BANNER = re.compile(r"mthreads-gmi:\s*(\S+)\s+Driver Version:\s*(\S+)")


def parse_mthreads_gmi(text: str) -> list[DeviceInfo]:
    """Devices of the default ``mthreads-gmi`` table, with processes counted from its process table."""
    banner = _BANNER.search(text)
    lines = text.splitlines()
    procs: dict[int, int] = {}
    in_procs = False
    for line in lines:
        if line.strip().startswith("Processes:"):
            in_procs = True
            continue
        parts = line.split()
        if in_procs and len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
            procs[int(parts[0])] = procs.get(int(parts[0]), 0) + 1
    devices = []
    for i, line in enumerate(lines):
        if line.strip().startswith("Processes:"):
            break
        m = _DEVICE_ROW.match(line)
        if not m:
            continue
        index = int(m.group(1))
        rest = m.group(4)
        util = re.search(r"(\d+(?:\.\d+)?)%", rest)
        mem = _MEM.search(rest)
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        temp = re.search(r"\|\s*(-?\d+(?:\.\d+)?)C\b", nxt)
        devices.append(DeviceInfo(
            index=index, model=m.group(2).strip(),
            memory_used_mib=mib(mem.group(1) + mem.group(2)) if mem else None,
            memory_total_mib=mib(mem.group(3) + mem.group(4)) if mem else None,
            processes=procs.get(index, 0),
            driver=banner.group(2) if banner else None,
            extra={"bus_id": m.group(3), "tool_version": banner.group(1) if banner else None,
                   "util_pct": float(util.group(1)) if util else None,
                   "temp_c": float(temp.group(1)) if temp else None}))
    return devices


def parse_mthreads_gmi_pids(text: str) -> dict[int, list[tuple[int, str]]]:
    """Device index -> [(pid, process name)] from the default table's ``Processes:`` section (names
    come truncated from the left, as the tool prints them)."""
    out: dict[int, list[tuple[int, str]]] = {}
    in_procs = False
    for line in text.splitlines():
        if line.strip().startswith("Processes:"):
            in_procs = True
            continue
        parts = line.split()
        if in_procs and len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
            name = " ".join(parts[2:-1]) if len(parts) > 3 else parts[2]
            out.setdefault(int(parts[0]), []).append((int(parts[1]), name))
    return out


def _flatten(obj: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(v, (*path, str(k).strip().lower()))
    else:
        yield path, obj


def _device_objects(doc: Any) -> list[tuple[int | None, dict[str, Any]]]:
    """The per-device objects of a ``--json`` document: a list of them, a dict holding such a
    list (``{"gpus": [...]}``), or a dict keyed by device (``{"gpu0": {...}}``)."""
    if isinstance(doc, list):
        return [(None, d) for d in doc if isinstance(d, dict)]
    if not isinstance(doc, dict):
        return []
    for value in doc.values():
        if isinstance(value, list) and value and all(isinstance(d, dict) for d in value):
            return [(None, d) for d in value]
    out = []
    for key, value in doc.items():
        m = re.search(r"(\d+)$", str(key).strip())
        if isinstance(value, dict) and m:
            out.append((int(m.group(1)), value))
    return out


def _pick(flat: list[tuple[tuple[str, ...], Any]], leaf: set[str], section: str | None = None,
          avoid: tuple[str, ...] = ("max", "default", "application", "target", "limit", "slowdown",
                                    "shutdown")) -> str | None:
    for path, value in flat:
        if not path or path[-1] not in leaf or value is None:
            continue
        joined = "/".join(path)
        if section is not None and section not in "/".join(path[:-1]):
            continue
        if any(a in joined for a in avoid):
            continue
        return str(value)
    return None


def parse_mthreads_gmi_json(text: str) -> list[TelemetrySample]:
    """Telemetry samples from ``mthreads-gmi --json`` (see the module docstring: no real capture)."""
    samples = []
    for pos, (key_index, obj) in enumerate(_device_objects(json.loads(text))):
        flat = list(_flatten(obj))
        idx = number(_pick(flat, {"index", "id", "gpu index", "minor number"}))
        index = int(idx) if idx is not None else key_index if key_index is not None else pos
        samples.append(TelemetrySample(
            index=index,
            sm_clock_mhz=number(_pick(flat, {"graphics", "gpu", "sm", "gpu clock", "graphics clock"}, "clock")),
            mem_clock_mhz=number(_pick(flat, {"memory", "mem", "memory clock"}, "clock")),
            temp_c=number(_pick(flat, {"gpu current temp", "gpu temp"}) or _pick(flat, {"gpu", "current"}, "temp")),
            power_w=number(_pick(flat, {"power draw", "power usage", "board power"})),
            util_pct=number(_pick(flat, {"gpu", "gpu util", "gpu utilization"}, "utilization")),
            mem_used_mib=mib(_pick(flat, {"used"}, "memory usage"))))
    return samples


__all__ = ["parse_mthreads_gmi", "parse_mthreads_gmi_json"]
