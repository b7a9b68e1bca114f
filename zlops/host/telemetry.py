"""Device telemetry sampled beside every benchmark shard: one CSV schema on every backend.

``telemetry.csv`` columns: timestamp, index, sm_clock_mhz, mem_clock_mhz, temp_c, power_w, util_pct,
mem_used_mib, and the host beside the benchmark (the cpu backend; :mod:`zlops.host.contention`): load1,
foreign_cpu_pct (other processes' CPU, % of one CPU), steal_pct (empty cell = not reported).
Telemetry is evidence: a missing or unpermitted sampler writes its reason to ``telemetry.err`` and the
benchmark runs unchanged; whether a contended run can be judged is :mod:`zlops.host.contention`'s call.
What each backend calls its clock is :mod:`zlops.backends.clocks`' (this module imports no backend).
"""

from __future__ import annotations

import csv
import json
import logging
import stat
import statistics
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

COLUMNS = ("timestamp", "index", "sm_clock_mhz", "mem_clock_mhz", "temp_c", "power_w", "util_pct", "mem_used_mib",
           "load1", "foreign_cpu_pct", "steal_pct")
CSV_NAME = "telemetry.csv"
ERR_NAME = "telemetry.err"
#: what the contention watch keeps beside the CSV (:mod:`zlops.host.contention` writes it)
CONTENTION_FILE = "contention.json"


@dataclass(frozen=True)
class TelemetrySample:
    index: int
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    util_pct: float | None = None
    mem_used_mib: float | None = None
    timestamp: str = ""
    load1: float | None = None
    foreign_cpu_pct: float | None = None
    steal_pct: float | None = None

    def row(self) -> list[str]:
        ts = self.timestamp or datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        vals = (self.sm_clock_mhz, self.mem_clock_mhz, self.temp_c, self.power_w, self.util_pct, self.mem_used_mib,
                self.load1, self.foreign_cpu_pct, self.steal_pct)
        return [ts, str(self.index), *("" if v is None else f"{v:g}" for v in vals)]


class TelemetrySampler:
    """Start/stop interface the runner uses; the base class samples nothing and says why."""

    def __init__(self, out_dir: Path, reason: str = "") -> None:
        self.out_dir = out_dir
        self.reason = reason

    def attach(self, *, locks_dir: Path | None = None, benchmark_pid: int | None = None) -> None:
        """What the runner knows that tells zlops' own processes from foreign ones: the device
        leases' folder (the other zlops benchmarks on this host) and, once it runs, the benchmark's
        pid. Only a sampler that watches other processes (:mod:`zlops.host.contention`) uses it."""
        return None

    def start(self) -> None:
        if self.reason:
            write_err(self.out_dir, self.reason)

    def stop(self) -> None:
        return None

    @property
    def pid(self) -> int | None:
        """The sampler's own process (its group leader), if it runs one: recorded in the shard's
        manifest so a later start can end it when zlops died without stopping it (zlops.run.recovery)."""
        return None


def write_err(out_dir: Path, reason: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / ERR_NAME).open("a", encoding="utf-8") as fh:
        fh.write(reason.rstrip() + "\n")
    log.info("telemetry unavailable: %s", reason)


class PollingSampler(TelemetrySampler):
    """Calls ``read()`` every ``interval_s`` in a thread and appends its samples to telemetry.csv.

    An exception from ``read`` stops sampling with the reason in telemetry.err; it never reaches
    the benchmark.
    """

    def __init__(self, out_dir: Path, read: Callable[[], Iterable[TelemetrySample]], *,
                 interval_s: float = 1.0) -> None:
        super().__init__(out_dir)
        self._read = read
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with (self.out_dir / CSV_NAME).open("w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerow(COLUMNS)
        self._thread = threading.Thread(target=self._loop, name="zlops-telemetry", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        path = self.out_dir / CSV_NAME
        while True:
            try:
                # rows are formatted inside the guard too: a malformed sample is a failing read
                rows = [s.row() for s in self._read()]
            except Exception as exc:  # noqa: BLE001 - a sampler must never take the benchmark down
                write_err(self.out_dir, f"sampler stopped: {type(exc).__name__}: {exc}")
                return
            with path.open("a", newline="", encoding="utf-8") as fh:
                csv.writer(fh).writerows(rows)
            if self._stop.wait(self._interval):
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _num(cell: str) -> float | None:
    cell = cell.strip()
    if not cell:
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def read_csv(path: Path) -> list[dict[str, Any]]:
    """Rows of a telemetry.csv with numbers parsed (None for empty cells)."""
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        rows = []
        for rec in csv.DictReader(fh):
            row: dict[str, Any] = {"timestamp": rec.get("timestamp", "")}
            for col in COLUMNS[1:]:
                row[col] = _num(rec.get(col) or "")
            rows.append(row)
        return rows


#: a sample counts as "busy" when the device reports at least this utilization
BUSY_UTIL_PCT = 5.0


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-shard telemetry summary stored with the results and shown next to any delta.

    median and min SM clock, max temperature, mean power, and the share of samples whose SM clock
    is below 90% of the shard's own peak clock (a throttling hint). Clock figures use the *busy*
    samples only (utilization >= 5%) where the device reports utilization: an idle GPU parks its
    clock (345 MHz on an H200 against 1980 MHz under load, measured), and a benchmark's process
    start, imports and host-side work are idle time that is not throttling.
    """
    busy = [r for r in rows if r.get("util_pct") is not None and float(r["util_pct"]) >= BUSY_UTIL_PCT]
    reports_util = any(r.get("util_pct") is not None for r in rows)
    clock_rows = busy if reports_util else list(rows)

    def col(name: str, among: Sequence[Mapping[str, Any]] = rows) -> list[float]:
        return [float(r[name]) for r in among if r.get(name) is not None]

    clocks, temps, power, util = col("sm_clock_mhz", clock_rows), col("temp_c"), col("power_w"), col("util_pct")
    out: dict[str, Any] = {"samples": len(rows)}
    if reports_util:
        out["busy_samples"] = len(busy)
    if clocks:
        peak = max(clocks)
        out.update(sm_clock_median_mhz=statistics.median(clocks), sm_clock_min_mhz=min(clocks),
                   sm_clock_peak_mhz=peak,
                   below_90pct_peak_share=sum(1 for c in clocks if c < 0.9 * peak) / len(clocks))
    if temps:
        out["temp_max_c"] = max(temps)
    if power:
        out["power_mean_w"] = statistics.fmean(power)
    if util:
        out["util_mean_pct"] = statistics.fmean(util)
    load, foreign, steal = col("load1"), col("foreign_cpu_pct"), col("steal_pct")
    if load:
        out["load1_max"] = max(load)
    if foreign:  # the mean over the whole run comes from contention.json when the sampler wrote it
        out.update(foreign_cpu_mean_pct=round(statistics.fmean(foreign), 1), foreign_cpu_max_pct=max(foreign))
    if steal:
        out["steal_max_pct"] = max(steal)
    return out


def summarize_dir(out_dir: Path) -> dict[str, Any]:
    """The shard's summary: its telemetry.csv, what the contention watch kept (``contention.json``:
    the run's mean foreign CPU, the busiest foreign processes, foreign device processes), and the
    reason telemetry is missing (``telemetry.err``)."""
    for name in (CSV_NAME, ERR_NAME, CONTENTION_FILE):  # a benchmark may have put a FIFO there: never block on it
        try:
            if not stat.S_ISREG((out_dir / name).lstat().st_mode):
                return {"error": f"{name} is not a regular file; telemetry not read"}
        except FileNotFoundError:
            continue
        except OSError as exc:
            return {"error": f"cannot read {name}: {exc}"}
    summary = {**summarize(read_csv(out_dir / CSV_NAME)), **read_contention(out_dir)}
    err = out_dir / ERR_NAME
    if err.exists():
        summary["error"] = err.read_text(encoding="utf-8", errors="replace").strip()[-500:]
    return summary


def read_contention(out_dir: Path) -> dict[str, Any]:
    """The shard's ``contention.json`` as written by :mod:`zlops.host.contention` ({} when absent or unreadable)."""
    try:
        data = json.loads((out_dir / CONTENTION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
