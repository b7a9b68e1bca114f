"""Parse ``npu-smi info`` (device table + process table) and ``npu-smi info -m`` (chip mapping).

Recorded inputs: ``tests/data/npu-smi/`` (Huawei doc examples kept as gpustack test data, three
generations). The table has two rows per chip::

    | NPU   Name           | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
    | Chip                 | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
    | 0     xxx            | OK            | 70.5        42                1232 / 1232          |
    | 0                    | 0000:C1:00.0  | 0           4252 / 15137      0    / 32768         |

What varies, and how it is handled:

- ``used / total`` pairs with any spacing (``0    / 32768``, ``59356/ 65536``) are found by regex;
  which pair is which comes from the header (Hugepages only on row one, HBM only where the
  header names it);
- 310 and older layouts head the chip row ``Chip    Device``: several chips share one NPU id. The
  Device column is NOT the logical id: in the 21.0.4 capture chips 0-3 show Device 3-6 while
  ``info -m`` gives them Chip Logic ID 0-3. ``ASCEND_RT_VISIBLE_DEVICES`` takes logical ids, so the
  index comes from ``info -m`` when given, else from the order of the chips in the table (which
  matches ``info -m`` in every capture, and is right inside a container where NPU ids are physical);
- health is ``OK``, ``Warning`` (or ``Alarm``/``Critical``); only ``OK`` counts as healthy;
- the process table (``| NPU     Chip  | Process id | ...``) gives processes per chip; an output
  without one (older layouts) leaves the count unknown (None), not zero;
- the fixtures end with a URL line that is not tool output; any line not in a table is ignored.

``Memory-Usage``/``HBM-Usage`` say MB; the totals (32768, 65536) are MiB, so they are read as MiB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from zlops.backends.base import DeviceInfo
from zlops.backends.parsers import number
from zlops.host.telemetry import TelemetrySample

_PAIR = re.compile(r"(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)")
_BUS_ID = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_BANNER = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")


@dataclass(frozen=True)
class NpuChip:
    """One chip row pair of ``npu-smi info``."""

    npu_id: int
    chip_id: int
    device_id: int | None  # the ``Device`` column of 310 layouts (physical, not the logical id)
    name: str
    health: str
    bus_id: str
    power_w: float | None = None
    temp_c: float | None = None
    aicore_pct: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    hbm_used_mib: float | None = None
    hbm_total_mib: float | None = None
    hugepages_used: float | None = None
    hugepages_total: float | None = None


@dataclass(frozen=True)
class NpuSmiInfo:
    """Everything ``npu-smi info`` printed: version, chips, and processes per (NPU id, chip id)
    (None when the output has no process table)."""

    version: str | None
    chips: tuple[NpuChip, ...]
    processes: dict[tuple[int, int], int] | None = field(default=None)


@dataclass(frozen=True)
class NpuMapping:
    """One row of ``npu-smi info -m``; ``logic_id`` is None for the ``Mcu`` row (``-``)."""

    npu_id: int
    chip_id: int
    logic_id: int | None
    chip_name: str


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _split_pairs(cell: str) -> tuple[list[str], list[tuple[float, float]]]:
    pairs = [(float(a), float(b)) for a, b in _PAIR.findall(cell)]
    return _PAIR.sub(" ", cell).split(), pairs


def parse_npu_smi_info(text: str) -> NpuSmiInfo:
    """The structured content of ``npu-smi info``."""
    version: str | None = None
    has_hbm = has_hugepages = False
    section = ""
    chips: list[NpuChip] = []
    processes: dict[tuple[int, int], int] | None = None
    pending: list[str] | None = None  # row one of a chip, waiting for row two
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        banner = _BANNER.search(line)
        if banner:
            version = banner.group(2)
            continue
        cells = _cells(line)
        head = cells[0].split()
        if head[:1] == ["NPU"] and len(cells) > 1 and "Process" in cells[1]:
            section, processes = "proc", {}
            continue
        if head[:1] == ["NPU"]:
            section, has_hugepages = "dev", "Hugepages" in line
            continue
        if head[:1] == ["Chip"]:
            has_hbm = "HBM" in line
            continue
        if section == "proc" and processes is not None and len(cells) >= 3 and len(head) >= 2 \
                and head[0].isdigit() and head[1].isdigit() and cells[1].isdigit():
            key = (int(head[0]), int(head[1]))
            processes[key] = processes.get(key, 0) + 1
            continue
        if section != "dev" or len(cells) < 3 or not head or not head[0].isdigit():
            continue
        if not _BUS_ID.match(cells[1]):
            pending = cells
            continue
        if pending is None:
            continue
        first_head = pending[0].split()
        top_vals, top_pairs = _split_pairs(pending[2])
        vals, pairs = _split_pairs(cells[2])
        mem = pairs[0] if pairs else (None, None)
        hbm = pairs[1] if has_hbm and len(pairs) > 1 else (None, None)
        huge = top_pairs[0] if has_hugepages and top_pairs else (None, None)
        chips.append(NpuChip(
            npu_id=int(first_head[0]), chip_id=int(head[0]),
            device_id=int(head[1]) if len(head) > 1 and head[1].isdigit() else None,
            name=" ".join(first_head[1:]) or "unknown", health=pending[1], bus_id=cells[1],
            power_w=number(top_vals[0]) if top_vals else None,
            temp_c=number(top_vals[1]) if len(top_vals) > 1 else None,
            aicore_pct=number(vals[0]) if vals else None,
            memory_used_mib=mem[0], memory_total_mib=mem[1], hbm_used_mib=hbm[0], hbm_total_mib=hbm[1],
            hugepages_used=huge[0], hugepages_total=huge[1]))
        pending = None
    return NpuSmiInfo(version=version, chips=tuple(chips), processes=processes)


def parse_npu_smi_mapping(text: str) -> list[NpuMapping]:
    """Rows of ``npu-smi info -m`` (``NPU ID  Chip ID  Chip Logic ID  Chip Name``)."""
    rows = []
    for line in text.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[0].isdigit() and parts[1].isdigit():
            logic = int(parts[2]) if parts[2].isdigit() else None
            rows.append(NpuMapping(int(parts[0]), int(parts[1]), logic, parts[3].strip()))
    return rows


def device_index(info: NpuSmiInfo, mapping: list[NpuMapping] | None = None) -> dict[tuple[int, int], int]:
    """The logical device index of each (NPU id, chip id): ``info -m``'s Chip Logic ID where the
    mapping has the chip, else the chip's position in the table (see the module docstring)."""
    by_map = {(m.npu_id, m.chip_id): m.logic_id for m in mapping or () if m.logic_id is not None}
    return {(c.npu_id, c.chip_id): by_map.get((c.npu_id, c.chip_id), pos) for pos, c in enumerate(info.chips)}


def parse_npu_smi_pids(text: str, mapping_text: str | None = None) -> dict[int, list[tuple[int, str]]] | None:
    """Logical device index -> [(pid, process name)] from ``npu-smi info``'s process table (None when
    the output has no process table: that layout cannot say)."""
    info = parse_npu_smi_info(text)
    if info.processes is None:
        return None
    index = device_index(info, parse_npu_smi_mapping(mapping_text) if mapping_text else None)
    out: dict[int, list[tuple[int, str]]] = {}
    section = False
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = _cells(line)
        head = cells[0].split()
        if head[:1] == ["NPU"]:
            section = len(cells) > 1 and "Process" in cells[1]
            continue
        if section and len(cells) >= 3 and len(head) >= 2 and head[0].isdigit() and head[1].isdigit() \
                and cells[1].isdigit():
            device = index.get((int(head[0]), int(head[1])))
            if device is not None:
                out.setdefault(device, []).append((int(cells[1]), cells[2] or "?"))
    return out


def parse_npu_smi(text: str, mapping_text: str | None = None) -> list[DeviceInfo]:
    """Devices of ``npu-smi info`` (optionally resolved through ``npu-smi info -m``).

    ``memory_used_mib``/``memory_total_mib`` are HBM where the layout has it (that is what an idle
    check reads), else the device memory column; both columns are kept in ``extra``.
    """
    info = parse_npu_smi_info(text)
    mapping = parse_npu_smi_mapping(mapping_text) if mapping_text else []
    names = {(m.npu_id, m.chip_id): m.chip_name for m in mapping}
    index = device_index(info, mapping)
    devices = []
    for chip in info.chips:
        key = (chip.npu_id, chip.chip_id)
        model = chip.name
        if set(model.lower()) <= {"x"} and key in names:  # masked name in the table
            model = names[key]
        hbm = chip.hbm_total_mib is not None
        devices.append(DeviceInfo(
            index=index[key], model=model, healthy=chip.health.upper() == "OK",
            memory_used_mib=chip.hbm_used_mib if hbm else chip.memory_used_mib,
            memory_total_mib=chip.hbm_total_mib if hbm else chip.memory_total_mib,
            processes=None if info.processes is None else info.processes.get(key, 0),
            driver=info.version,
            extra={"npu_id": chip.npu_id, "chip_id": chip.chip_id, "device_id": chip.device_id,
                   "health": chip.health, "bus_id": chip.bus_id,
                   "memory_used_mib": chip.memory_used_mib, "memory_total_mib": chip.memory_total_mib,
                   "hbm_used_mib": chip.hbm_used_mib, "hbm_total_mib": chip.hbm_total_mib,
                   **({"chip_name": names[key]} if key in names else {})}))
    return devices


def parse_npu_smi_samples(text: str, mapping_text: str | None = None) -> list[TelemetrySample]:
    """One telemetry sample per chip: power, temperature, AICore% as utilization, HBM (else device
    memory) in use. ``npu-smi info`` reports no clocks, so those cells stay empty."""
    info = parse_npu_smi_info(text)
    index = device_index(info, parse_npu_smi_mapping(mapping_text) if mapping_text else [])
    return [TelemetrySample(
        index=index[(c.npu_id, c.chip_id)], temp_c=c.temp_c, power_w=c.power_w, util_pct=c.aicore_pct,
        mem_used_mib=c.hbm_used_mib if c.hbm_total_mib is not None else c.memory_used_mib) for c in info.chips]


__all__ = [
    "NpuChip", "NpuMapping", "NpuSmiInfo", "device_index", "parse_npu_smi", "parse_npu_smi_info",
    "parse_npu_smi_mapping", "parse_npu_smi_samples",
]
