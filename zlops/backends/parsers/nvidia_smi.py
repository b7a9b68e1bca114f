"""Parse nvidia-smi output: ``--query-gpu``/``--query-compute-apps`` CSV, ``--version``, the default table.

The CSV forms are what zlops runs; the default table is a fallback for hosts whose nvidia-smi
refuses a query field. Recorded inputs: ``tests/data/nvidia-smi/`` (two H200 hosts, drivers
580.159.04 and 590.48.01, plus one Windows row from nvidia_gpu_exporter's test data).

Facts the parser relies on (all seen in those captures):

- the separator is ``", "``; with a header, the header carries units (``memory.used [MiB]``) and
  renames some fields (``clocks.sm`` -> ``clocks.current.sm``, ``clocks_throttle_reasons.*`` ->
  ``clocks_event_reasons.*``), so header names are mapped back to the names zlops asks for;
- without ``nounits`` values carry units (``78.06 W``, ``345 MHz``, ``0 %``, ``143771 MiB``);
- "not available" is ``[N/A]``, ``[Not Supported]`` or ``[Requested functionality has been deprecated]``;
- ``timestamp`` is local time as ``2026/07/03 22:10:46.109``;
- a streaming ``-lms`` file can end in a half-written line when the sampler is stopped, so a row
  with the wrong number of cells is dropped rather than guessed.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from datetime import datetime, timezone, tzinfo

from zlops.backends.base import DeviceInfo
from zlops.backends.parsers import is_missing, mib, number
from zlops.host.telemetry import TelemetrySample

#: The fields zlops queries to enumerate devices.
ENUM_FIELDS = ("index", "name", "uuid", "driver_version", "memory.used", "memory.total", "pci.bus_id")
#: The fields of the streaming telemetry query, in the order of ``zlops.host.telemetry.COLUMNS``.
TELEMETRY_FIELDS = ("timestamp", "index", "clocks.sm", "clocks.mem", "temperature.gpu", "power.draw",
                    "utilization.gpu", "memory.used")
#: The fields zlops queries for processes per GPU.
APPS_FIELDS = ("gpu_uuid", "pid", "process_name", "used_gpu_memory")

#: Header spellings nvidia-smi prints for a field under another name (printed -> requested).
_HEADER_ALIASES = {
    "clocks.current.sm": "clocks.sm",
    "clocks.current.memory": "clocks.mem",
    "clocks.current.graphics": "clocks.gr",
    "clocks.current.video": "clocks.video",
    "used_memory": "used_gpu_memory",
}
_TIMESTAMP_FORMAT = "%Y/%m/%d %H:%M:%S.%f"


def canonical_field(header_cell: str) -> str:
    """The requested field name for a header cell: units dropped, renamed fields mapped back."""
    name = re.sub(r"\s*\[[^\]]*\]\s*$", "", header_cell.strip())
    name = name.replace("clocks_event_reasons", "clocks_throttle_reasons")
    return _HEADER_ALIASES.get(name, name)


def parse_query_csv(text: str, fields: Sequence[str] | None = None) -> list[dict[str, str | None]]:
    """Rows of a ``--query-*`` CSV as ``{field: cell}``; "not available" cells are None.

    ``fields`` names the columns of a ``noheader`` output; without it the first line is the header.
    Lines that are not rows (``No devices were found``, a torn last line) are skipped.
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if fields is None:
        if not lines:
            return []
        names = [canonical_field(c) for c in next(csv.reader([lines[0]], skipinitialspace=True))]
        lines = lines[1:]
    else:
        names = list(fields)
    rows: list[dict[str, str | None]] = []
    for cells in csv.reader(lines, skipinitialspace=True):
        if len(cells) != len(names):
            continue
        rows.append({n: None if is_missing(c) else c.strip() for n, c in zip(names, cells, strict=True)})
    return rows


def _int(cell: str | None) -> int | None:
    value = number(cell)
    return int(value) if value is not None else None


def parse_nvidia_smi(text: str, fields: Sequence[str] | None = None) -> list[DeviceInfo]:
    """Devices from ``--query-gpu=index,name,uuid,driver_version,memory.used,memory.total,... --format=csv``.

    Process counts are not in this query; see :func:`parse_compute_apps`.
    """
    devices = []
    for pos, row in enumerate(parse_query_csv(text, fields)):
        index = _int(row.get("index"))
        extra = {k: row[k] for k in ("uuid", "pci.bus_id") if row.get(k)}
        devices.append(DeviceInfo(
            index=pos if index is None else index, model=row.get("name") or "unknown",
            memory_used_mib=mib(row.get("memory.used")), memory_total_mib=mib(row.get("memory.total")),
            driver=row.get("driver_version"), extra=extra))
    return devices


def parse_compute_apps(text: str, fields: Sequence[str] | None = None) -> dict[str, int]:
    """Compute processes per GPU from ``--query-compute-apps=gpu_uuid,pid,...``, keyed by GPU UUID
    (or bus id when the query has no UUID). An idle GPU has no row, so it is absent here."""
    counts: dict[str, int] = {}
    for row in parse_query_csv(text, fields):
        key = row.get("gpu_uuid") or row.get("gpu_bus_id")
        if key and row.get("pid"):
            counts[key] = counts.get(key, 0) + 1
    return counts


def parse_compute_app_pids(apps_text: str, gpus_text: str) -> dict[int, list[tuple[int, str]]]:
    """GPU index -> [(pid, process name)] from ``--query-compute-apps=gpu_uuid,pid,process_name
    --format=csv`` and ``--query-gpu=index,uuid --format=csv`` (which names each UUID's index)."""
    index = {row["uuid"]: int(row["index"]) for row in parse_query_csv(gpus_text)
             if row.get("uuid") and (row.get("index") or "").isdigit()}
    out: dict[int, list[tuple[int, str]]] = {}
    for row in parse_query_csv(apps_text):
        gpu, pid = index.get(row.get("gpu_uuid") or ""), row.get("pid") or ""
        if gpu is not None and pid.isdigit():
            out.setdefault(gpu, []).append((int(pid), row.get("process_name") or "?"))
    return out


def parse_timestamp(cell: str | None, tz: tzinfo | None = None) -> str:
    """ISO 8601 for nvidia-smi's ``2026/07/03 22:10:46.109``; with ``tz`` (the host's zone, in which
    nvidia-smi prints) it is converted to UTC. Empty when the cell is not a timestamp."""
    if not cell:
        return ""
    try:
        when = datetime.strptime(cell.strip(), _TIMESTAMP_FORMAT)
    except ValueError:
        return ""
    if tz is not None:
        when = when.replace(tzinfo=tz).astimezone(timezone.utc)
    return when.isoformat(timespec="milliseconds")


def parse_nvidia_smi_samples(text: str, fields: Sequence[str] | None = TELEMETRY_FIELDS, *,
                             tz: tzinfo | None = None) -> list[TelemetrySample]:
    """Telemetry samples from the streaming query (``noheader,nounits`` by default, in
    :data:`TELEMETRY_FIELDS` order); pass ``fields=None`` for an output with a header, or the
    field list of another ``noheader`` query. Fields the query lacks are None in the samples."""
    samples = []
    for row in parse_query_csv(text, fields):
        index = _int(row.get("index"))
        if index is None:
            continue
        samples.append(TelemetrySample(
            index=index, sm_clock_mhz=number(row.get("clocks.sm")), mem_clock_mhz=number(row.get("clocks.mem")),
            temp_c=number(row.get("temperature.gpu")), power_w=number(row.get("power.draw")),
            util_pct=number(row.get("utilization.gpu")), mem_used_mib=mib(row.get("memory.used")),
            timestamp=parse_timestamp(row.get("timestamp"), tz)))
    return samples


def parse_version(text: str) -> dict[str, str]:
    """``driver`` and ``cuda`` versions from ``nvidia-smi --version`` or the default table's banner."""
    out: dict[str, str] = {}
    for key, pattern in (("driver", r"DRIVER version\s*:\s*(\S+)|Driver Version:\s*(\S+)"),
                         ("cuda", r"CUDA Version\s*:?\s*(\d[\w.]*)")):
        m = re.search(pattern, text, flags=re.IGNORECASE)
        if m:
            out[key] = next(g for g in m.groups() if g)
    return out


_TABLE_GPU = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(On|Off)\s+\|\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f.]+)\s")
_TABLE_MEM = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")
_TABLE_PROC = re.compile(r"^\|\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+(?:C|G|C\+G|M|M\+C)\s")


def parse_default_table(text: str) -> list[DeviceInfo]:
    """Devices from the plain ``nvidia-smi`` table (fallback): name, bus id, memory, processes,
    driver and CUDA versions from the banner."""
    versions = parse_version(text)
    lines = text.splitlines()
    procs: dict[int, int] = {}
    for line in lines:
        p = _TABLE_PROC.match(line)
        if p:
            procs[int(p.group(1))] = procs.get(int(p.group(1)), 0) + 1
    devices = []
    for i, line in enumerate(lines):
        m = _TABLE_GPU.match(line)
        if not m or i + 1 >= len(lines):
            continue
        index = int(m.group(1))
        detail = lines[i + 1]
        mem = _TABLE_MEM.search(detail)
        temp = re.search(r"\s(\d+)C\s", detail)
        devices.append(DeviceInfo(
            index=index, model=m.group(2).strip(),
            memory_used_mib=float(mem.group(1)) if mem else None,
            memory_total_mib=float(mem.group(2)) if mem else None,
            processes=procs.get(index, 0), driver=versions.get("driver"), toolkit=versions.get("cuda"),
            extra={"pci.bus_id": m.group(4), **({"temp_c": float(temp.group(1))} if temp else {})}))
    return devices


__all__ = [
    "APPS_FIELDS", "ENUM_FIELDS", "TELEMETRY_FIELDS", "canonical_field", "parse_compute_apps", "parse_default_table",
    "parse_nvidia_smi", "parse_nvidia_smi_samples", "parse_query_csv", "parse_timestamp", "parse_version",
]
