"""The vendor backends end to end against the fake tools in tests/fakebin (which replay real output):
enumeration, the idle range, telemetry for chosen devices, and every way a sampler can fail
without reaching the benchmark. No Ascend, MUSA or extra NVIDIA GPUs are needed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fake_devices import use_fakebin

from zlops.backends import get_backend
from zlops.errors import BackendUnavailable
from zlops.host.telemetry import COLUMNS, CSV_NAME, ERR_NAME, TelemetrySampler, read_csv
from zlops.run.devices import pick_idle_range, resolve_devices


def sample(sampler: TelemetrySampler, seconds: float = 0.4) -> None:
    sampler.start()
    time.sleep(seconds)
    sampler.stop()


def header(out: Path) -> str:
    return (out / CSV_NAME).read_text().splitlines()[0]


def err(out: Path) -> str:
    return (out / ERR_NAME).read_text() if (out / ERR_NAME).exists() else ""


# --- ascend (fake npu-smi: an 8-NPU 910B3 host) ---------------------------------------------------

def test_ascend_enumerates_eight_npus_and_picks_the_idle_range(monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakebin(monkeypatch, FAKE_NPU_BUSY="2,3")
    backend = get_backend("npu")
    infos = backend.enumerate()
    assert [i.index for i in infos] == list(range(8))
    assert {i.model for i in infos} == {"910B3"} and {i.driver for i in infos} == {"24.1.RC2"}
    assert [(i.memory_used_mib, i.processes) for i in infos[1:4]] == [(0.0, 0), (59356.0, 1), (59356.0, 1)]
    assert {i.memory_total_mib for i in infos} == {65536.0}
    assert infos[0].extra["chip_name"] == "Ascend 910B3"
    assert pick_idle_range(infos) == [4, 5, 6, 7]
    assert resolve_devices(backend, None) == [4, 5, 6, 7]
    assert resolve_devices(backend, [2]) == [2]
    assert backend.identity([5]) == {"backend": "ascend", "graph_capture_supported": False, "timer": "direct",
                                     "device_model": "910B3", "driver": "24.1.RC2", "toolkit": None,
                                     "device_ids": ["bus_id:0000:82:00.0"]}


def test_ascend_samples_two_devices_into_telemetry_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakebin(monkeypatch, FAKE_NPU_BUSY="5")
    sample(get_backend("ascend").telemetry_sampler([1, 5], tmp_path, interval_s=0.05))
    assert header(tmp_path) == ",".join(COLUMNS)
    rows = read_csv(tmp_path / CSV_NAME)
    assert {r["index"] for r in rows} == {1, 5} and len(rows) >= 4
    by = {int(r["index"]): r for r in rows}
    assert (by[1]["power_w"], by[1]["temp_c"], by[1]["util_pct"], by[1]["mem_used_mib"]) == (90.5, 41, 0, 0)
    assert (by[5]["power_w"], by[5]["temp_c"], by[5]["util_pct"], by[5]["mem_used_mib"]) == (350.2, 55, 100, 59356)
    assert by[1]["sm_clock_mhz"] is None and by[1]["timestamp"]
    assert err(tmp_path) == ""


def test_ascend_devices_come_from_the_visibility_variable_else_all(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakebin(monkeypatch, ASCEND_RT_VISIBLE_DEVICES="2,3")
    sample(get_backend("ascend").telemetry_sampler([], tmp_path / "vis", interval_s=0.05), 0.2)
    assert {r["index"] for r in read_csv(tmp_path / "vis" / CSV_NAME)} == {2, 3}
    monkeypatch.delenv("ASCEND_RT_VISIBLE_DEVICES")
    sample(get_backend("ascend").telemetry_sampler([], tmp_path / "all", interval_s=0.05), 0.2)
    assert {r["index"] for r in read_csv(tmp_path / "all" / CSV_NAME)} == set(range(8))


def test_ascend_names_a_requested_device_it_does_not_have(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakebin(monkeypatch)
    sample(get_backend("ascend").telemetry_sampler([7, 9], tmp_path, interval_s=0.05), 0.2)
    assert {r["index"] for r in read_csv(tmp_path / CSV_NAME)} == {7}
    assert err(tmp_path) == "npu-smi reports no device [9] (it reports [0, 1, 2, 3, 4, 5, 6, 7])\n"


def test_a_failing_npu_smi_stops_sampling_with_its_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakebin(monkeypatch, FAKE_NPU_EXIT="3")
    sample(get_backend("ascend").telemetry_sampler([0], tmp_path, interval_s=0.05), 0.2)
    text = err(tmp_path)
    assert text.startswith("sampler stopped: ProcessError: telemetry sampler npu-smi failed")
    assert "exit code: 3" in text and "dcmi module initialize failed" in text
    assert read_csv(tmp_path / CSV_NAME) == []
    with pytest.raises(Exception, match="exit code: 3"):
        get_backend("ascend").enumerate()


def test_missing_and_unexecutable_tools_are_reasons_not_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    sample(get_backend("ascend").telemetry_sampler([0], tmp_path / "a"), 0.05)
    assert err(tmp_path / "a").startswith(f"npu-smi not found on PATH ({bin_dir})")
    with pytest.raises(BackendUnavailable, match="npu-smi is not installed"):
        get_backend("ascend").enumerate()
    (bin_dir / "mthreads-gmi").write_text("#!/bin/sh\n")
    (bin_dir / "mthreads-gmi").chmod(0o644)
    sample(get_backend("musa").telemetry_sampler([0], tmp_path / "m"), 0.05)
    assert err(tmp_path / "m") == (f"{bin_dir / 'mthreads-gmi'} is not executable by this user; "
                                   "no telemetry for this shard\n")
    with pytest.raises(BackendUnavailable):
        get_backend("rocm").enumerate()


# --- musa (fake mthreads-gmi: 4 MTT S80, --json is synthetic) -----------------------------------------

def test_musa_enumerates_from_the_table_and_samples_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakebin(monkeypatch, FAKE_MUSA_BUSY="1")
    backend = get_backend("moore")
    infos = backend.enumerate()
    assert [(i.index, i.model, i.memory_used_mib, i.memory_total_mib, i.processes) for i in infos] == [
        (0, "MTT S80", 0.0, 16384.0, 0), (1, "MTT S80", 1339.0, 16384.0, 2),
        (2, "MTT S80", 0.0, 16384.0, 0), (3, "MTT S80", 0.0, 16384.0, 0)]
    assert resolve_devices(backend, None) == [2, 3]
    sample(backend.telemetry_sampler([0, 1], tmp_path, interval_s=0.05))
    assert header(tmp_path) == ",".join(COLUMNS)
    by = {int(r["index"]): r for r in read_csv(tmp_path / CSV_NAME)}
    assert set(by) == {0, 1}
    assert (by[1]["sm_clock_mhz"], by[1]["mem_clock_mhz"], by[1]["temp_c"], by[1]["power_w"], by[1]["util_pct"],
            by[1]["mem_used_mib"]) == (1888, 1750, 56, 477.68, 98, 1339)
    assert (by[0]["sm_clock_mhz"], by[0]["power_w"], by[0]["mem_used_mib"]) == (600, 52.1, 0)
    assert err(tmp_path) == ""


# --- cuda (fake nvidia-smi replaying a real H200; NVML hidden) ------------------------------------------

@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # import pynvml -> ImportError


def test_cuda_enumerates_through_nvidia_smi(monkeypatch: pytest.MonkeyPatch, no_nvml: None) -> None:
    use_fakebin(monkeypatch, FAKE_NVSMI_BUSY="1")
    infos = get_backend("cuda").enumerate()
    assert [(i.index, i.model, i.memory_used_mib, i.processes, i.driver, i.toolkit) for i in infos] == [
        (0, "NVIDIA H200", 0.0, 0, "580.159.04", "13.0"), (1, "NVIDIA H200", 2566.0, 1, "580.159.04", "13.0")]
    assert infos[0].extra["source"] == "nvidia-smi"
    assert pick_idle_range(infos) == [0]
    # the physical device's id goes into the run identity (the same model on two leases: not the same device)
    assert get_backend("cuda").identity([1])["device_ids"] == ["uuid:GPU-dbaa8812-a865-c744-d74e-df61ed3378b1"]


def _argvs(path: Path) -> list[list[str]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_cuda_streams_the_visible_devices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "argv.jsonl"
    use_fakebin(monkeypatch, FAKE_NVSMI_GPUS="4", FAKE_NVSMI_ARGV=str(log), CUDA_VISIBLE_DEVICES="2,3")
    sample(get_backend("cuda").telemetry_sampler([], tmp_path / "vis", interval_s=0.05))
    (argv,) = _argvs(log)
    assert argv[-4:] == ["-lms", "50", "-i", "2,3"]
    assert argv[0] == ("--query-gpu=timestamp,index,clocks.sm,clocks.mem,temperature.gpu,power.draw,"
                       "utilization.gpu,memory.used") and argv[1] == "--format=csv,noheader,nounits"
    rows = read_csv(tmp_path / "vis" / CSV_NAME)
    assert {r["index"] for r in rows} == {2, 3} and len(rows) >= 4
    assert rows[0]["sm_clock_mhz"] == 345 and rows[0]["power_w"] == 80.97 and rows[0]["timestamp"].endswith("+00:00")
    assert err(tmp_path / "vis") == ""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    sample(get_backend("cuda").telemetry_sampler([], tmp_path / "all", interval_s=0.05), 0.2)
    assert "-i" not in _argvs(log)[1]  # every device: no -i at all, never a bare one
    assert {r["index"] for r in read_csv(tmp_path / "all" / CSV_NAME)} == {0, 1, 2, 3}


def test_cuda_names_a_device_nvidia_smi_silently_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakebin(monkeypatch, FAKE_NVSMI_GPUS="1")
    sample(get_backend("cuda").telemetry_sampler([0, 1], tmp_path / "a", interval_s=0.05), 0.2)
    assert {r["index"] for r in read_csv(tmp_path / "a" / CSV_NAME)} == {0}
    assert err(tmp_path / "a") == "nvidia-smi reported no samples for device [1]\n"
    sample(get_backend("cuda").telemetry_sampler([5], tmp_path / "b", interval_s=0.05), 0.3)
    assert err(tmp_path / "b").startswith("nvidia-smi exited with code 6 before the benchmark ended")
    assert read_csv(tmp_path / "b" / CSV_NAME) == []


class FakeNVML:
    """Just enough of nvidia-ml-py for enumerate(): two H200s, GPU 1 busy."""

    class NVMLError(Exception):
        pass

    nvmlMemory_v2 = 2
    inits = 0

    def __init__(self, fail_init: bool = False) -> None:
        self.fail_init = fail_init

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        return None

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.04"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 13000

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"NVIDIA H200"

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return f"GPU-{h}"

    def nvmlDeviceGetMemoryInfo(self, h: int, version: int = 1) -> object:
        used = (2566 if h else 0) * 2**20 + (0 if version == 2 else 542 * 2**20)  # v1 counts reserved memory
        return type("Mem", (), {"used": used, "total": 143771 * 2**20})()

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[object]:
        return [object()] if h else []


def test_cuda_prefers_nvml_and_reads_v2_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pynvml", FakeNVML())
    infos = get_backend("cuda").enumerate()
    assert [(i.index, i.model, i.memory_used_mib, i.memory_total_mib, i.processes, i.toolkit) for i in infos] == [
        (0, "NVIDIA H200", 0.0, 143771.0, 0, "13.0"), (1, "NVIDIA H200", 2566.0, 143771.0, 1, "13.0")]
    assert infos[1].extra == {"uuid": "GPU-1", "source": "nvml"}


def test_cuda_falls_back_to_nvidia_smi_when_nvml_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    use_fakebin(monkeypatch)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", FakeNVML(fail_init=True))
    infos = get_backend("cuda").enumerate()
    assert len(infos) == 2 and {i.extra["source"] for i in infos} == {"nvidia-smi"}
