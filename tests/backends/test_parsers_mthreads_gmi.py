"""mthreads-gmi parsers: the default table on a real 1.14.0 capture; ``--json`` on SYNTHETIC input.

No real ``mthreads-gmi --json`` output exists anywhere we could find. The JSON tests below use
tests/data/mthreads-gmi/SYNTHETIC_mthreads-gmi_json_2gpu.json and inline documents written from
the campaign notes (seeds/003): units glued to values ("36C", "1888MHz", "477.68W") and a
"Power Draw " key with a trailing space. They pin the parser's tolerance, not the tool's format.
"""

from __future__ import annotations

import json
from pathlib import Path

from zlops.backends.parsers.mthreads_gmi import parse_mthreads_gmi, parse_mthreads_gmi_json

DATA = Path(__file__).resolve().parents[1] / "data" / "mthreads-gmi"
S80 = DATA / "gpustack-docs_mthreads-gmi_1.14.0_MTT-S80.txt"
SYNTHETIC = DATA / "SYNTHETIC_mthreads-gmi_json_2gpu.json"


def test_real_s80_table() -> None:
    (gpu,) = parse_mthreads_gmi(S80.read_text())
    assert (gpu.index, gpu.model, gpu.memory_used_mib, gpu.memory_total_mib) == (0, "MTT S80", 1339.0, 16384.0)
    assert gpu.processes == 2 and gpu.driver == "2.7.0"
    assert gpu.extra == {"bus_id": "00000000:01:00.0", "tool_version": "1.14.0", "util_pct": 98.0, "temp_c": 56.0}


def test_synthetic_json_strips_glued_units_and_the_trailing_space_key() -> None:
    busy, idle = parse_mthreads_gmi_json(SYNTHETIC.read_text())
    assert (busy.index, busy.sm_clock_mhz, busy.mem_clock_mhz, busy.temp_c, busy.power_w, busy.util_pct,
            busy.mem_used_mib) == (0, 1888.0, 1750.0, 36.0, 477.68, 98.0, 1339.0)
    assert (idle.index, idle.sm_clock_mhz, idle.power_w, idle.mem_used_mib) == (1, 600.0, None, 0.0)


def test_json_keyed_by_device_without_index_fields() -> None:
    doc = {"gpu0": {"Clocks": {"SM": "1650MHz"}, "Power Draw ": "300.5W", "Temperature": {"GPU": "61C"},
                    "Utilization": {"GPU": "50%"}},
           "gpu1": {"Clocks": {"SM": "1700MHz"}, "Power Draw ": "310W"}}
    samples = parse_mthreads_gmi_json(json.dumps(doc))
    assert [(s.index, s.sm_clock_mhz, s.power_w) for s in samples] == [(0, 1650.0, 300.5), (1, 1700.0, 310.0)]
    assert (samples[0].temp_c, samples[0].util_pct, samples[1].temp_c) == (61.0, 50.0, None)


def test_max_and_limit_values_are_never_taken_for_current_ones() -> None:
    doc = [{"Index": "3", "Max Clocks": {"Graphics": "2000MHz"}, "Clocks": {"Graphics": "1000MHz"},
            "Power Readings": {"Power Limit": "600W", "Power Draw ": "150W"}}]
    (s,) = parse_mthreads_gmi_json(json.dumps(doc))
    assert (s.index, s.sm_clock_mhz, s.power_w) == (3, 1000.0, 150.0)


def test_process_pids_of_the_real_s80_table() -> None:
    from zlops.backends.parsers.mthreads_gmi import parse_mthreads_gmi_pids

    assert parse_mthreads_gmi_pids(S80.read_text()) == {0: [(120, "...ird_party/bin/llama-box/llama-box"),
                                                            (2022, "...ird_party/bin/llama-box/llama-box")]}
