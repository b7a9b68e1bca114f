"""Telemetry: the fixed CSV schema, a failing sampler that never raises, the per-shard summary."""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from zlops.host.telemetry import (
    COLUMNS,
    CSV_NAME,
    ERR_NAME,
    PollingSampler,
    TelemetrySample,
    TelemetrySampler,
    read_csv,
    summarize,
    summarize_dir,
)


def _run(sampler: TelemetrySampler, seconds: float = 0.25) -> None:
    sampler.start()
    time.sleep(seconds)
    sampler.stop()


def test_csv_has_the_fixed_columns_and_empty_cells_for_missing_values(tmp_path: Path) -> None:
    def read() -> list[TelemetrySample]:
        return [TelemetrySample(index=0, sm_clock_mhz=1980, temp_c=61.5, power_w=700.25, util_pct=100),
                TelemetrySample(index=1, mem_used_mib=1024)]

    _run(PollingSampler(tmp_path / "shard", read, interval_s=0.05))
    with (tmp_path / "shard" / CSV_NAME).open(newline="") as fh:
        records = list(csv.reader(fh))
    assert tuple(records[0]) == COLUMNS
    body = records[1:]
    assert len(body) >= 2 and len(body) % 2 == 0
    first, second = body[0], body[1]
    assert first[0] and first[1:] == ["0", "1980", "", "61.5", "700.25", "100", "", "", "", ""]
    assert second[1:] == ["1", "", "", "", "", "", "1024", "", "", ""]
    rows = read_csv(tmp_path / "shard" / CSV_NAME)
    assert rows[0]["sm_clock_mhz"] == 1980.0 and rows[0]["mem_clock_mhz"] is None and rows[1]["index"] == 1
    assert not (tmp_path / "shard" / ERR_NAME).exists()


def test_a_failing_read_writes_telemetry_err_and_never_raises(tmp_path: Path) -> None:
    calls = 0

    def read() -> list[TelemetrySample]:
        nonlocal calls
        calls += 1
        if calls > 2:
            raise RuntimeError("nvml went away")
        return [TelemetrySample(index=0, sm_clock_mhz=1000)]

    sampler = PollingSampler(tmp_path, read, interval_s=0.02)
    _run(sampler)
    assert calls == 3  # sampling stopped at the first failure
    assert (tmp_path / ERR_NAME).read_text() == "sampler stopped: RuntimeError: nvml went away\n"
    assert len(read_csv(tmp_path / CSV_NAME)) == 2  # what was sampled before the failure is kept


def test_a_malformed_sample_is_a_failing_read_too(tmp_path: Path) -> None:
    def read() -> Iterable[TelemetrySample]:
        return [TelemetrySample(index=0, sm_clock_mhz="N/A")]  # type: ignore[arg-type]

    _run(PollingSampler(tmp_path, read, interval_s=0.02), 0.1)
    assert "sampler stopped: ValueError" in (tmp_path / ERR_NAME).read_text()
    assert (tmp_path / CSV_NAME).read_text().strip() == ",".join(COLUMNS)


def test_a_read_that_is_not_iterable_is_recorded(tmp_path: Path) -> None:
    _run(PollingSampler(tmp_path, lambda: None, interval_s=0.02), 0.1)  # type: ignore[arg-type, return-value]
    assert "sampler stopped: TypeError" in (tmp_path / ERR_NAME).read_text()


def test_stop_returns_promptly_and_the_thread_ends(tmp_path: Path) -> None:
    sampler = PollingSampler(tmp_path, lambda: [TelemetrySample(index=0)], interval_s=30)
    sampler.start()
    start = time.monotonic()
    sampler.stop()
    assert time.monotonic() - start < 2
    assert not any(t.name == "zlops-telemetry" and t.is_alive() for t in threading.enumerate())


def test_start_truncates_a_previous_csv(tmp_path: Path) -> None:
    (tmp_path / CSV_NAME).write_text("old,junk\n1,2\n")
    sampler = PollingSampler(tmp_path, list, interval_s=0.02)
    _run(sampler, 0.05)
    assert (tmp_path / CSV_NAME).read_text().strip() == ",".join(COLUMNS)


def test_base_sampler_writes_its_reason_or_nothing(tmp_path: Path) -> None:
    TelemetrySampler(tmp_path / "a", reason="npu-smi not found").start()
    assert (tmp_path / "a" / ERR_NAME).read_text() == "npu-smi not found\n"
    quiet = TelemetrySampler(tmp_path / "b")
    quiet.start()
    quiet.stop()
    assert not (tmp_path / "b").exists()


def test_summarize_known_series() -> None:
    rows: list[dict[str, float | None]] = [
        {"sm_clock_mhz": 1000.0, "temp_c": 60.0, "power_w": 300.0, "util_pct": 100.0},
        {"sm_clock_mhz": 1000.0, "temp_c": 70.0, "power_w": 500.0, "util_pct": 50.0},
        {"sm_clock_mhz": 850.0, "temp_c": None, "power_w": None, "util_pct": None},
        {"sm_clock_mhz": 950.0, "temp_c": 65.0, "power_w": 400.0, "util_pct": 90.0},
    ]
    s = summarize(rows)
    # the row without utilization is not a busy sample: clock figures come from the other three
    assert s == {
        "samples": 4, "busy_samples": 3, "sm_clock_median_mhz": 1000.0, "sm_clock_min_mhz": 950.0,
        "sm_clock_peak_mhz": 1000.0, "below_90pct_peak_share": 0.0, "temp_max_c": 70.0, "power_mean_w": 400.0,
        "util_mean_pct": pytest.approx(80.0),
    }
    no_util = summarize([{k: v for k, v in r.items() if k != "util_pct"} for r in rows])
    assert no_util["sm_clock_median_mhz"] == 975.0 and no_util["below_90pct_peak_share"] == 0.25


def test_idle_clock_parking_is_not_throttling() -> None:
    """Real shape, from an H200 nightly shard (docs/evidence/h200.md): 5 idle seconds of torch import
    at the 345 MHz idle clock, then the benchmark at 1950-1980 MHz."""
    idle = [{"sm_clock_mhz": 345.0, "util_pct": 0.0, "temp_c": 36.0, "power_w": 79.4}] * 5
    busy = [{"sm_clock_mhz": c, "util_pct": u, "temp_c": 48.0, "power_w": 520.0}
            for c, u in ((1950.0, 99.0), (1980.0, 74.0), (1980.0, 100.0))]
    s = summarize([*idle, *busy, {"sm_clock_mhz": 1980.0, "util_pct": 0.0, "temp_c": 40.0, "power_w": 236.0}])
    assert s["busy_samples"] == 3 and s["below_90pct_peak_share"] == 0.0
    assert s["sm_clock_min_mhz"] == 1950.0 and s["sm_clock_median_mhz"] == 1980.0
    throttled = summarize([*busy, {"sm_clock_mhz": 1500.0, "util_pct": 100.0}])
    assert throttled["below_90pct_peak_share"] == 0.25


def test_summarize_without_values() -> None:
    assert summarize([]) == {"samples": 0}
    assert summarize([{"sm_clock_mhz": None}]) == {"samples": 1}


def test_summarize_does_not_mutate_its_input() -> None:
    rows = [{"sm_clock_mhz": 1.0}, {"sm_clock_mhz": 2.0}]
    before = [dict(r) for r in rows]
    summarize(rows)
    assert rows == before


def test_summarize_dir_reads_csv_and_error(tmp_path: Path) -> None:
    assert summarize_dir(tmp_path) == {"samples": 0}
    (tmp_path / CSV_NAME).write_text(",".join(COLUMNS) + "\n2026-01-01T00:00:00,0,1410,,,,,\nbad,0,x,,,,,\n")
    (tmp_path / ERR_NAME).write_text("sampler stopped: OSError: boom\n")
    s = summarize_dir(tmp_path)
    assert s["samples"] == 2 and s["sm_clock_peak_mhz"] == 1410.0
    assert s["error"] == "sampler stopped: OSError: boom"
