"""`zlops devices` and `zlops telemetry` on the cpu backend and on the fake npu-smi."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_devices import use_fakebin

from zlops.cli import main
from zlops.host.telemetry import COLUMNS, read_csv


def test_devices_table_marks_busy_npus_and_prints_the_auto_range(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    use_fakebin(monkeypatch, FAKE_NPU_BUSY="2,3")
    assert main(["devices", "--backend", "npu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["index", "model", "health", "memory", "used/total", "MiB", "processes", "idle"]
    assert lines[3].split() == ["2", "910B3", "OK", "59356", "/", "65536", "1", "no"]
    assert lines[5].split() == ["4", "910B3", "OK", "0", "/", "65536", "0", "yes"]
    assert len(lines) == 10 and lines[-1] == "auto-picked: 4,5,6,7"


def test_devices_json_and_zl_backend(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    use_fakebin(monkeypatch, FAKE_NPU_BUSY="0,1,2,3,4,5,6,7", ZL_BACKEND="ascend")
    assert main(["devices", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] == "ascend" and doc["auto_devices"] == []
    assert "name the devices to use explicitly" in doc["auto_error"]
    assert [d["idle"] for d in doc["devices"]] == [False] * 8
    assert doc["devices"][0] == {"index": 0, "model": "910B3", "healthy": True, "health": "OK",
                                 "memory_used_mib": 59356.0, "memory_total_mib": 65536.0, "processes": 1,
                                 "idle": False, "driver": "24.1.RC2", "toolkit": None}


def test_devices_on_cpu_has_no_idle_notion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["devices", "--backend", "cpu"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[0] == "0" and out[1].split()[-1] == "-" and out[-1] == "auto-picked: 0"


def test_devices_without_a_backend_or_tool_fail_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("ZL_BACKEND", raising=False)
    assert main(["devices"]) == 2
    assert "pass --backend NAME or set ZL_BACKEND" in capsys.readouterr().err
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["devices", "--backend", "ascend"]) == 1
    assert "npu-smi is not installed" in capsys.readouterr().err


def test_telemetry_samples_two_npus_into_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    use_fakebin(monkeypatch, FAKE_NPU_BUSY="1")
    out = tmp_path / "sub" / "npu.csv"
    assert main(["telemetry", "--backend", "ascend", "--devices", "0,1", "--interval-ms", "50",
                 "--duration-s", "0.3", "--out", str(out)]) == 0
    assert out.read_text().splitlines()[0] == ",".join(COLUMNS)
    rows = read_csv(out)
    assert {r["index"] for r in rows} == {0, 1}
    text = capsys.readouterr().out
    assert f"samples from ascend -> {out}" in text
    assert "device 1: samples=" in text and "power_mean_w=350.2" in text and "util_mean_pct=100" in text
    assert [p.name for p in out.parent.iterdir()] == ["npu.csv"]  # the scratch folder is gone


def test_telemetry_on_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cpu.csv"
    assert main(["telemetry", "--backend", "cpu", "--interval-ms", "50", "--duration-s", "0.2", "--out", str(out)]) == 0
    rows = read_csv(out)
    assert rows and {r["index"] for r in rows} == {0} and all(r["util_pct"] is not None for r in rows)
    assert "device 0: samples=" in capsys.readouterr().out


def test_telemetry_without_the_tool_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    out = tmp_path / "t.csv"
    assert main(["telemetry", "--backend", "musa", "--duration-s", "0", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "mthreads-gmi not found on PATH" in err and "no telemetry sampled from musa" in err
    assert not out.exists()


def test_telemetry_rejects_a_bad_device_list(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main(["telemetry", "--backend", "cpu", "--devices", "0,x"])
    assert ei.value.code == 2 and "expected comma-separated device indices" in capsys.readouterr().err
