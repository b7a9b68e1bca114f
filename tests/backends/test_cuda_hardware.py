"""The cuda backend on a real NVIDIA GPU: nvidia-smi and NVML agree, a GPU holding memory is busy,
the streaming sampler writes rows for the requested device and names one that does not exist.

Skipped where nvidia-smi is absent. Runs without zlops' test conftest too (a GPU host may only have
the stdlib and torch): ``python -m pytest -c /dev/null --noconftest tests/backends/test_cuda_hardware.py``.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest

from zlops.backends import get_backend
from zlops.backends.cuda import nvml_devices, smi_devices
from zlops.host import proc
from zlops.host.telemetry import COLUMNS, CSV_NAME, ERR_NAME, read_csv
from zlops.run import devices

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no nvidia-smi on this host")]

HOG = ("import time, torch; x = torch.empty(2**30, dtype=torch.uint8, device='cuda'); "
       "print('ready', flush=True); time.sleep(60)")


def test_nvidia_smi_and_nvml_agree() -> None:
    smi = smi_devices()
    assert smi and all(d.model.startswith("NVIDIA") and d.memory_total_mib for d in smi)
    assert all(d.driver and d.toolkit and d.processes is not None for d in smi)
    nvml = nvml_devices()
    print("nvidia-smi:", smi, "\nnvml:", nvml)
    if nvml is None:
        pytest.skip("nvidia-ml-py not installed: only nvidia-smi checked")
    assert [(d.index, d.model, d.driver, d.toolkit) for d in nvml] == [
        (d.index, d.model, d.driver, d.toolkit) for d in smi]
    for a, b in zip(nvml, smi, strict=True):
        assert a.memory_total_mib == pytest.approx(b.memory_total_mib, abs=1)
        assert a.memory_used_mib == pytest.approx(b.memory_used_mib, abs=2)
        assert a.processes == b.processes


def test_a_gpu_holding_memory_is_busy_until_it_lets_go(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    backend = get_backend("cuda")
    before = devices.find_device(backend, 0)  # other tests of this session may hold a context already
    out = tmp_path / "hog.out"
    hog = proc.spawn([sys.executable, "-c", HOG], env=proc.build_env({"CUDA_VISIBLE_DEVICES": "0"}),
                     stdout_path=out)
    try:
        deadline = time.monotonic() + 60
        while "ready" not in out.read_text() and time.monotonic() < deadline and hog.returncode is None:
            time.sleep(0.2)
        assert "ready" in out.read_text(), out.read_text()
        info = devices.find_device(backend, 0)
        print("busy:", info, devices.describe(info))
        assert info.memory_used_mib is not None and info.memory_used_mib >= 1024
        assert info.processes and info.processes >= 1
        assert not devices.is_idle(info)
        assert devices.wait_until_idle(backend, 0, timeout_s=0.5, poll_s=0.2) is False
    finally:
        hog.stop()
    if devices.is_idle(before):
        assert devices.wait_until_idle(backend, 0, timeout_s=20, poll_s=0.5) is True
    else:  # back to what it was before the hog
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            now = devices.find_device(backend, 0)
            grown = abs((now.memory_used_mib or 0) - (before.memory_used_mib or 0))
            if now.processes == before.processes and grown < 64:
                break
            time.sleep(0.5)
        assert now.processes == before.processes, (before, now)


def test_streaming_sampler_writes_rows_for_the_device(tmp_path: Path) -> None:
    sampler = get_backend("cuda").telemetry_sampler([0], tmp_path, interval_s=0.1)
    sampler.start()
    time.sleep(1.5)
    sampler.stop()
    assert (tmp_path / CSV_NAME).read_text().splitlines()[0] == ",".join(COLUMNS)
    rows = read_csv(tmp_path / CSV_NAME)
    print(rows[:2], len(rows))
    assert len(rows) >= 5 and {r["index"] for r in rows} == {0}
    assert all(r["sm_clock_mhz"] and r["power_w"] and r["temp_c"] is not None and r["mem_used_mib"] is not None
               for r in rows)
    assert rows[0]["timestamp"].endswith("+00:00")
    assert not (tmp_path / ERR_NAME).exists()


def test_a_device_that_does_not_exist_is_named_not_dropped(tmp_path: Path) -> None:
    sampler = get_backend("cuda").telemetry_sampler([0, 97], tmp_path, interval_s=0.1)
    sampler.start()
    time.sleep(1.0)
    sampler.stop()
    err = (tmp_path / ERR_NAME).read_text()
    print(err)
    rows = read_csv(tmp_path / CSV_NAME)
    # nvidia-smi -i 0,97 either prints GPU 0 alone (exit 0) or refuses the list: both leave a reason
    assert "97" in err or "exited with code" in err
    assert {r["index"] for r in rows} <= {0}
