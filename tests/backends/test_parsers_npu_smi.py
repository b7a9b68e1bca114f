"""npu-smi parsers on Huawei's documented outputs (three generations) and the fake 910B table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fake_devices import FAKEBIN

from zlops.backends.parsers.npu_smi import (
    parse_npu_smi,
    parse_npu_smi_info,
    parse_npu_smi_mapping,
    parse_npu_smi_samples,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "npu-smi"
A800_9010 = DATA / "ai-server_atlas-800-training-server_model-9010_version-24.1.RC2.txt"
A800_9010_MAP = DATA / "ai-server_atlas-800-training-server_model-9010_version-24.1.RC2_mapping.txt"
A800_3000_NEW = DATA / "ai-server_atlas-800-inference-server_model-3000_version-1.0.11-1.0.15.txt"
A800_3000_NEW_MAP = DATA / "ai-server_atlas-800-inference-server_model-3000_version-1.0.11-1.0.15_mapping.txt"
A800_3000_OLD = DATA / "ai-server_atlas-800-inference-server_model-3000_version-1.0.0-1.0.10.txt"


def test_910_table_with_hbm_health_and_process_table() -> None:
    info = parse_npu_smi_info(A800_9010.read_text())
    assert info.version == "24.1.RC2"
    assert [c.npu_id for c in info.chips] == list(range(8))
    assert [c.health for c in info.chips] == ["OK", "OK", "OK", "Warning", "OK", "OK", "OK", "Warning"]
    c3 = info.chips[3]
    assert (c3.power_w, c3.temp_c, c3.aicore_pct, c3.bus_id) == (206.9, 39.0, 0.0, "0000:01:00.0")
    assert (c3.memory_used_mib, c3.memory_total_mib, c3.hbm_used_mib, c3.hbm_total_mib) == (3616.0, 15039.0, 0.0,
                                                                                             32768.0)
    assert (c3.hugepages_used, c3.hugepages_total) == (1232.0, 1232.0)
    assert info.processes == {(n, 0): 4 for n in range(8)}


def test_910_devices_use_hbm_as_memory_and_mapping_names_masked_models() -> None:
    devices = parse_npu_smi(A800_9010.read_text(), A800_9010_MAP.read_text())
    assert [d.index for d in devices] == list(range(8))
    assert {d.model for d in devices} == {"Ascend 910A"}  # the table says "xxx"
    assert [d.healthy for d in devices] == [True, True, True, False, True, True, True, False]
    assert all(d.memory_used_mib == 0.0 and d.memory_total_mib == 32768.0 for d in devices)
    assert devices[0].extra["memory_used_mib"] == 4252.0 and devices[0].extra["health"] == "OK"
    assert all(d.processes == 4 and d.driver == "24.1.RC2" for d in devices)
    assert parse_npu_smi(A800_9010.read_text())[0].model == "xxx"  # without the mapping


def test_310_layout_shares_an_npu_id_and_takes_indices_from_the_mapping() -> None:
    info = parse_npu_smi_info(A800_3000_NEW.read_text())
    assert info.version == "21.0.4.B030" and info.processes is None
    assert [(c.npu_id, c.chip_id, c.device_id) for c in info.chips] == [(6, 0, 3), (6, 1, 4), (6, 2, 5), (6, 3, 6)]
    assert [(c.hugepages_used, c.hugepages_total) for c in info.chips] == [(0.0, 970.0)] * 4
    devices = parse_npu_smi(A800_3000_NEW.read_text(), A800_3000_NEW_MAP.read_text())
    assert [d.index for d in devices] == [0, 1, 2, 3]  # Chip Logic ID, not the Device column (3-6)
    assert [d.memory_used_mib for d in devices] == [2703.0, 2867.0, 2867.0, 2867.0]
    assert {d.memory_total_mib for d in devices} == {8192.0} and {d.model for d in devices} == {"310"}
    assert all(d.processes is None and d.extra["hbm_total_mib"] is None for d in devices)
    assert [d.index for d in parse_npu_smi(A800_3000_NEW.read_text())] == [0, 1, 2, 3]  # table order


def test_mapping_has_an_mcu_row_without_logic_id() -> None:
    rows = parse_npu_smi_mapping(A800_3000_NEW_MAP.read_text())
    assert len(rows) == 5 and rows[-1].chip_name == "Mcu" and rows[-1].logic_id is None
    assert rows[0].chip_name == "MiniD" and rows[0].logic_id == 0
    assert [r.chip_name for r in parse_npu_smi_mapping(A800_9010_MAP.read_text())] == ["Ascend 910A"] * 8


def test_oldest_310_layout_without_hugepages() -> None:
    info = parse_npu_smi_info(A800_3000_OLD.read_text())
    assert info.version == "20.2.0"
    assert [(c.npu_id, c.chip_id, c.temp_c) for c in info.chips] == [(215, 0, 56.0), (215, 1, 57.0), (215, 2, 57.0),
                                                                       (215, 3, 55.0)]
    assert all(c.hugepages_total is None and c.hbm_total_mib is None and c.power_w == 12.8 for c in info.chips)
    assert [s.mem_used_mib for s in parse_npu_smi_samples(A800_3000_OLD.read_text())] == [2703.0] * 4


def test_samples_carry_power_temp_aicore_and_hbm() -> None:
    samples = parse_npu_smi_samples(A800_9010.read_text())
    assert [(s.index, s.power_w, s.temp_c, s.util_pct, s.mem_used_mib) for s in samples][:2] == [
        (0, 70.5, 42.0, 0.0, 0.0), (1, 71.2, 36.0, 0.0, 0.0)]
    assert all(s.sm_clock_mhz is None and s.mem_clock_mhz is None for s in samples)


def test_fake_910b_table_parses_busy_devices_and_no_space_before_slash() -> None:
    out = subprocess.run([sys.executable, str(FAKEBIN / "npu-smi"), "info"], capture_output=True, text=True,
                         check=True, env={"FAKE_NPU_BUSY": "2,3", "PATH": ""}).stdout
    assert "59356/ 65536" in out and "No running processes found in NPU 0" in out
    devices = parse_npu_smi(out)
    assert [(d.index, d.memory_used_mib, d.processes) for d in devices][1:5] == [
        (1, 0.0, 0), (2, 59356.0, 1), (3, 59356.0, 1), (4, 0.0, 0)]
    assert {d.model for d in devices} == {"910B3"} and {d.memory_total_mib for d in devices} == {65536.0}


def test_process_pids_per_logical_device() -> None:
    from zlops.backends.parsers.npu_smi import parse_npu_smi_pids

    pids = parse_npu_smi_pids(A800_9010.read_text(), A800_9010_MAP.read_text())
    assert sorted(pids) == list(range(8))
    assert pids[0] == [(37656, "hlt_host_devmm_"), (37664, "hlt_host_devmm_"), (37640, "hlt_host_devmm_"),
                       (37648, "hlt_host_devmm_")]
    assert parse_npu_smi_pids(A800_3000_OLD.read_text()) is None  # no process table: cannot say
