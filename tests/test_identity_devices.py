"""Two runs on other physical devices of one model: compared, with a warning that names both devices.

Why (tests/data/flaggems_h200/holdout3_2026-12-02, docs/evidence/h200_holdout3): the same FlagGems code took
1.0371 ms on one H200 lease and 1.0204 ms on the next; a +3.42% change on the second read +1.81% against history
of the first, and nothing zlops recorded told the two devices apart.
"""

from __future__ import annotations

from zlops.backends.base import DeviceInfo, device_id
from zlops.identity import INFO_AXES, build_identity, check_caliber
from zlops.kernels.attribution import identity_changes

GPU_A = "uuid:GPU-dbaa8812-a865-c744-d74e-df61ed3378b0"
GPU_B = "uuid:GPU-5e0c91aa-0b1d-7f2e-9c44-1a2b3c4d5e6f"


def _ident(ids: list[str] | None) -> dict:
    backend = {"backend": "cuda", "device_model": "NVIDIA H200", "driver": "580.159.04", "toolkit": "13.0",
               "timer": "cuda_event", "graph_capture_supported": True, "device_ids": ids}
    return build_identity(backend_identity=backend, rounds=1, pins={})


def test_device_id_prefers_the_uuid_and_says_none_when_the_tool_names_none() -> None:
    assert device_id(DeviceInfo(0, "H200", extra={"uuid": "GPU-1", "pci.bus_id": "00:1"})) == "uuid:GPU-1"
    assert device_id(DeviceInfo(0, "910B3", extra={"bus_id": "0000:82:00.0"})) == "bus_id:0000:82:00.0"
    assert device_id(DeviceInfo(0, "cpu", extra={"uuid": "N/A"})) is None


def test_other_devices_are_compared_with_a_warning_naming_both() -> None:
    assert "device_ids" in INFO_AXES
    report = check_caliber(_ident([GPU_A]), _ident([GPU_B]), base_label="baseline ce7e5c8", head_label="tonight")
    assert not report.refused and report.mismatches == ()
    (warning,) = report.warnings
    assert warning.startswith("other devices: baseline ce7e5c8 ran on GPU-dbaa8812, tonight on GPU-5e0c91aa; "
                              "the delta includes the two devices' own difference")
    assert report.lines() == [f"warning [caliber] {warning}"]
    # the same device, or a side that recorded none (older runs, tools without ids): nothing to say
    assert check_caliber(_ident([GPU_A]), _ident([GPU_A])).warnings == ()
    assert check_caliber(_ident(None), _ident([GPU_B])).warnings == ()


def test_an_alert_attribution_names_the_device_change() -> None:
    assert identity_changes(_ident([GPU_A]), _ident([GPU_B])) == ["device GPU-dbaa8812 -> GPU-5e0c91aa"]
    assert identity_changes(_ident([GPU_A]), _ident([GPU_A])) == []
