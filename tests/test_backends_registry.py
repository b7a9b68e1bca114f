"""The backend registry: canonical names, aliases, pinning, and no vendor import at package import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from zlops.backends import (
    SPECS,
    backend_names,
    get_backend,
    get_spec,
    resolve_backend_name,
)
from zlops.errors import BackendUnavailable
from zlops.host import proc
from zlops.host.telemetry import COLUMNS, CSV_NAME, ERR_NAME, read_csv


@pytest.mark.parametrize(("name", "canonical"), [
    ("cuda", "cuda"), ("nvidia", "cuda"), ("NVIDIA", "cuda"), (" npu ", "ascend"), ("huawei", "ascend"),
    ("mthreads", "musa"), ("moore", "musa"), ("amd", "rocm"), ("hip", "rocm"), ("cpu", "cpu"),
])
def test_aliases_resolve_to_the_canonical_name(name: str, canonical: str) -> None:
    assert resolve_backend_name(name) == canonical
    assert get_spec(name).name == canonical
    assert get_backend(name).name == canonical


@pytest.mark.parametrize("name", ["tpu", "", "cuda11", "gpu"])
def test_unknown_name_lists_every_valid_one(name: str) -> None:
    with pytest.raises(BackendUnavailable) as ei:
        get_backend(name)
    msg = str(ei.value)
    assert f"unknown backend {name!r}" in msg
    for spec in SPECS.values():
        assert spec.name in msg
        for alias in spec.aliases:
            assert alias in msg


def test_backend_names_lists_canonical_names_first() -> None:
    names = backend_names()
    assert names[:5] == sorted(SPECS)
    assert set(names[5:]) == {a for s in SPECS.values() for a in s.aliases}


def test_get_backend_reads_zl_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZL_BACKEND", "nvidia")
    assert get_backend().name == "cuda"
    monkeypatch.delenv("ZL_BACKEND")
    with pytest.raises(BackendUnavailable, match="set ZL_BACKEND"):
        get_backend()


@pytest.mark.parametrize(("name", "var"), [
    ("cuda", "CUDA_VISIBLE_DEVICES"), ("musa", "MUSA_VISIBLE_DEVICES"), ("ascend", "ASCEND_RT_VISIBLE_DEVICES"),
    ("rocm", "HIP_VISIBLE_DEVICES"),
])
def test_pin_env_sets_the_visibility_variable(name: str, var: str) -> None:
    backend = get_backend(name)
    assert backend.pin_env([2]) == {var: "2"}
    assert backend.pin_env([0, 3]) == {var: "0,3"}


def test_cpu_pins_nothing() -> None:
    assert get_backend("cpu").pin_env([0]) == {}


def test_every_visibility_variable_is_denied_from_the_parent_environment() -> None:
    # the backend sets it per shard; a stale value of the parent must never reach a benchmark
    for spec in SPECS.values():
        if spec.visibility_env is not None:
            assert spec.visibility_env not in proc.build_env(base={spec.visibility_env: "9", "PATH": "/bin"})


def test_importing_the_registry_imports_no_backend_module() -> None:
    # zlops.backends.spec is the spec's dataclass, plain data: the registry's one import
    code = ("import json, sys, zlops.backends; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('zlops.backends.') "
            "and m != 'zlops.backends.spec' or m in ('torch', 'torch_npu', 'pynvml', 'psutil'))))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert json.loads(out) == []


def test_identity_names_backend_and_caliber(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no npu-smi: the device part is unknown, not an error
    ident = get_backend("ascend").identity([0])
    assert ident == {"backend": "ascend", "graph_capture_supported": False, "timer": "direct",
                     "device_model": None, "driver": None, "toolkit": None, "device_ids": None}
    cpu = get_backend("cpu").identity([0])
    assert cpu["backend"] == "cpu" and cpu["device_model"] and cpu["timer"] == "direct"


def test_cpu_enumerates_one_device() -> None:
    devices = get_backend("cpu").enumerate()
    assert len(devices) == 1 and devices[0].index == 0 and devices[0].model
    assert devices[0].memory_total_mib and devices[0].memory_total_mib > 0


def test_cpu_sampler_writes_telemetry_rows(tmp_path: Path) -> None:
    import time

    sampler = get_backend("cpu").telemetry_sampler([0], tmp_path, interval_s=0.05)
    sampler.start()
    time.sleep(0.3)
    sampler.stop()
    assert (tmp_path / CSV_NAME).read_text().splitlines()[0] == ",".join(COLUMNS)
    rows = read_csv(tmp_path / CSV_NAME)
    assert len(rows) >= 2 and all(r["index"] == 0 for r in rows)
    assert all(r["mem_used_mib"] is not None and r["util_pct"] is not None for r in rows)
    assert not (tmp_path / ERR_NAME).exists()


def test_backend_without_sampler_records_why(tmp_path: Path) -> None:
    from zlops.backends.base import DeviceBackend

    sampler = DeviceBackend(get_spec("cuda")).telemetry_sampler([0], tmp_path)
    sampler.start()
    sampler.stop()
    assert "no telemetry sampler for backend cuda" in (tmp_path / ERR_NAME).read_text()
    assert not (tmp_path / CSV_NAME).exists()


def test_backend_whose_tool_is_missing_records_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    sampler = get_backend("cuda").telemetry_sampler([0], tmp_path)
    sampler.start()
    sampler.stop()
    assert "nvidia-smi not found on PATH" in (tmp_path / ERR_NAME).read_text()
    assert not (tmp_path / CSV_NAME).exists()
