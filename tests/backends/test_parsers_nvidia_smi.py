"""nvidia-smi parsers on recorded real output (two H200 hosts, drivers 580.159.04 and 590.48.01)."""

from __future__ import annotations

import re
from datetime import timedelta, timezone
from pathlib import Path

import pytest

from zlops.backends.parsers import mib, number
from zlops.backends.parsers.nvidia_smi import (
    canonical_field,
    parse_compute_apps,
    parse_default_table,
    parse_nvidia_smi,
    parse_nvidia_smi_samples,
    parse_query_csv,
    parse_timestamp,
    parse_version,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi"
CAPTURE_590 = DATA / "linux-x86_64__nvidia-h200__590.48.01.txt"
SAMPLED_FIELDS = ("index", "clocks.sm", "clocks.mem", "temperature.gpu", "power.draw", "utilization.gpu")


def section(title: str) -> str:
    """The body of one ``# <phase> :: <title>`` section of the 590.48.01 capture."""
    text = CAPTURE_590.read_text()
    start = text.index(f"# {title}\n")
    body = text[start:].split("#" * 80 + "\n", 2)[1]
    return body.split("\n\n\n")[0]


@pytest.mark.parametrize(("cell", "value"), [
    ("78.06 W", 78.06), ("345 MHz", 345.0), ("0 %", 0.0), ("36", 36.0), ("1888MHz", 1888.0), ("36C", 36.0),
    ("[N/A]", None), ("[Not Supported]", None), ("[Requested functionality has been deprecated]", None),
    ("N/A", None), ("", None), ("0x0000000000000001", None), ("Default", None),
])
def test_number_strips_units_and_not_available(cell: str, value: float | None) -> None:
    assert number(cell) == value


def test_mib_converts_from_the_unit_of_the_cell_or_the_key() -> None:
    assert mib("143771 MiB") == 143771.0
    assert mib("17163091968", "B") == pytest.approx(16368.0)
    assert mib("2 GiB") == 2048.0 and mib("[N/A]") is None


def test_header_names_map_back_to_the_requested_fields() -> None:
    assert canonical_field("clocks.current.sm [MHz]") == "clocks.sm"
    assert canonical_field(" clocks.current.memory [MHz]") == "clocks.mem"
    assert canonical_field("clocks_event_reasons.active") == "clocks_throttle_reasons.active"
    assert canonical_field("memory.used [MiB]") == "memory.used"


def test_enumeration_query_580() -> None:
    (gpu,) = parse_nvidia_smi((DATA / "h200_580.159.04_enum.csv").read_text())
    assert (gpu.index, gpu.model, gpu.driver) == (0, "NVIDIA H200", "580.159.04")
    assert (gpu.memory_used_mib, gpu.memory_total_mib) == (0.0, 143771.0)
    assert gpu.extra == {"uuid": "GPU-dbaa8812-a865-c744-d74e-df61ed3378b6", "pci.bus_id": "00000000:00:06.0"}


def test_wide_query_580_with_renamed_header() -> None:
    rows = parse_query_csv((DATA / "h200_580.159.04_query.csv").read_text())
    assert rows[0]["clocks.sm"] == "345 MHz" and rows[0]["clocks.max.sm"] == "1980 MHz"
    assert rows[0]["clocks_throttle_reasons.active"] == "0x0000000000000001"
    (gpu,) = parse_nvidia_smi((DATA / "h200_580.159.04_query.csv").read_text())
    assert gpu.memory_total_mib == 143771.0 and gpu.extra["uuid"].startswith("GPU-69925e11")


def test_windows_row_has_index_last_and_na_serial() -> None:
    gpus = parse_nvidia_smi((DATA / "exporter-testdata-query.txt").read_text())
    assert gpus[0].index == 0 and gpus[0].model == "NVIDIA GeForce RTX 2080 SUPER"
    assert gpus[0].memory_used_mib == 575.0 and gpus[0].memory_total_mib is None and gpus[0].driver == "466.63"
    assert parse_query_csv((DATA / "exporter-testdata-query.txt").read_text())[0]["serial"] is None


def test_full_590_query_has_na_deprecated_and_units() -> None:
    for title, used in (("idle :: query-gpu (csv, what the exporter parses)", 0.0),
                        ("load :: query-gpu (csv, what the exporter parses)", 32362.0)):
        rows = parse_query_csv(section(title))
        assert len(rows) == 1
        row = rows[0]
        assert row["display_mode"] is None  # [Requested functionality has been deprecated]
        assert row["vgpu_driver_capability.heterogenous_multivGPU"] is None  # [N/A]
        (gpu,) = parse_nvidia_smi(section(title))
        assert (gpu.model, gpu.driver, gpu.memory_used_mib, gpu.memory_total_mib) == (
            "NVIDIA H200", "590.48.01", used, 143771.0)


def test_compute_apps_count_processes_per_gpu() -> None:
    assert parse_compute_apps(section("idle :: query-compute-apps (per-process)")) == {}
    assert parse_compute_apps((DATA / "h200_580.159.04_compute_apps_idle.csv").read_text()) == {}
    assert parse_compute_apps(section("load :: query-compute-apps (per-process)")) == {
        "GPU-00000000-0000-0000-0000-000000000000": 3}


def test_sampled_lms500_capture_has_411_samples_with_idle_and_boost_clocks() -> None:
    samples = parse_nvidia_smi_samples((DATA / "h200_580.159.04_sampled_nounits_lms500.csv").read_text(),
                                       SAMPLED_FIELDS)
    assert len(samples) == 411
    assert {s.index for s in samples} == {0}
    first = samples[0]
    assert (first.sm_clock_mhz, first.mem_clock_mhz, first.temp_c, first.power_w, first.util_pct) == (
        345.0, 3201.0, 36.0, 78.05, 0.0)
    assert first.mem_used_mib is None and first.timestamp == ""  # not in that query
    clocks = {s.sm_clock_mhz for s in samples}
    assert min(clocks) == 345.0 and max(clocks) == 1980.0


def test_streaming_telemetry_capture_converts_local_timestamps_to_utc() -> None:
    text = (DATA / "h200_580.159.04_telemetry_lms200.csv").read_text()
    samples = parse_nvidia_smi_samples(text, tz=timezone(timedelta(hours=8)))
    assert len(samples) == 15
    assert samples[0].timestamp == "2026-11-29T12:21:50.686+00:00"
    assert (samples[0].power_w, samples[0].mem_used_mib, samples[-1].power_w) == (88.03, 0.0, 80.98)
    naive = parse_nvidia_smi_samples(text)
    assert naive[0].timestamp == "2026-11-29T20:21:50.686"


def test_a_torn_last_line_is_dropped() -> None:
    text = (DATA / "h200_580.159.04_telemetry_lms200.csv").read_text()
    assert len(parse_nvidia_smi_samples(text + "2026/11/29 20:21:53.727, 0, 345")) == 15


def test_headered_telemetry_query_with_units() -> None:
    (s,) = parse_nvidia_smi_samples((DATA / "h200_580.159.04_telemetry_query.csv").read_text(), None)
    assert (s.index, s.sm_clock_mhz, s.mem_clock_mhz, s.temp_c, s.power_w, s.util_pct, s.mem_used_mib) == (
        0, 345.0, 3201.0, 36.0, 80.97, 0.0, 0.0)


def test_no_devices_message_is_no_samples() -> None:
    assert parse_nvidia_smi_samples((DATA / "h200_580.159.04_missing_id.txt").read_text()) == []


def test_versions_from_version_output_and_banner() -> None:
    assert parse_version((DATA / "h200_580.159.04_version.txt").read_text()) == {"driver": "580.159.04", "cuda": "13.0"}
    assert parse_version(section("capabilities :: version")) == {"driver": "590.48.01", "cuda": "13.1"}
    assert parse_version((DATA / "h200_580.159.04_default.txt").read_text()) == {"driver": "580.159.04",
                                                                                  "cuda": "13.0"}


def test_default_table_idle_and_under_load() -> None:
    (idle,) = parse_default_table((DATA / "h200_580.159.04_default.txt").read_text())
    assert (idle.index, idle.model, idle.memory_used_mib, idle.memory_total_mib, idle.processes) == (
        0, "NVIDIA H200", 0.0, 143771.0, 0)
    assert (idle.driver, idle.toolkit, idle.extra["pci.bus_id"], idle.extra["temp_c"]) == (
        "580.159.04", "13.0", "00000000:00:06.0", 36.0)
    (load,) = parse_default_table(section("load :: nvidia-smi (default table)"))
    assert (load.memory_used_mib, load.processes, load.toolkit, load.extra["temp_c"]) == (32362.0, 3, "13.1", 52.0)


def test_timestamp_that_is_not_one_is_empty() -> None:
    assert parse_timestamp("[N/A]") == "" and parse_timestamp(None) == ""
    assert re.fullmatch(r"2026-07-03T22:10:46\.109", parse_timestamp("2026/07/03 22:10:46.109"))


def test_compute_app_pids_per_gpu_index_of_a_real_h200() -> None:
    from zlops.backends.parsers.nvidia_smi import parse_compute_app_pids

    apps = (DATA / "h200_compute_apps_pids_two_procs.csv").read_text()
    gpus = (DATA / "h200_index_uuid.csv").read_text()
    assert parse_compute_app_pids(apps, gpus) == {0: [(538, "/opt/torch/.venv/bin/python3"),
                                                      (540, "/opt/torch/.venv/bin/python3")]}
    assert parse_compute_app_pids((DATA / "h200_580.159.04_compute_apps_idle.csv").read_text(), gpus) == {}
    assert parse_compute_app_pids(apps, "index, uuid\n") == {}  # a UUID without an index is nobody's
