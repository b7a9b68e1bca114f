"""Shard bundles made by hand, laid out as zlops.run.runner.run_shard leaves them (test_bundle, test_ab)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from zlops.formats.zlops_json import dumps
from zlops.identity import IDENTITY_FILE, build_identity, write_identity
from zlops.model import CaseResult

BACKEND = {"backend": "cuda", "device_model": "NVIDIA H200", "driver": "570.86", "toolkit": "12.8",
           "graph_capture_supported": True, "timer": "graph"}
STARTED, ENDED = "2026-11-30T01:00:00+00:00", "2026-11-30T01:02:30+00:00"


def case(name: str, samples: Sequence[float], *, metric: str = "latency", unit: str = "ms",
         **params: Any) -> CaseResult:
    return CaseResult(name, metric, unit, True, tuple(samples), params)


def identity(**overrides: Any) -> dict[str, Any]:
    ident = build_identity(backend_identity=BACKEND, rounds=5, pins={}, harness={
        "bench_level": "core", "shape_mode": "upstream", "tuner_cache": "inherited", "autotune_mode": "replay",
        "framework": {"torch": "2.11.0", "triton": "3.5.0"}})
    ident.update(overrides)
    return ident


def make_bundle(root: Path, cases: Sequence[CaseResult] = (), *, status: str = "ok",
                ident: Mapping[str, Any] | None = None, results_text: str | None = None,
                telemetry: str = "csv", manifest_extra: Mapping[str, Any] | None = None,
                timing_extra: Mapping[str, Any] | None = None, pool: str = "h200", device: int = 0) -> Path:
    """A complete, valid bundle in ``root`` unless the keyword arguments make it otherwise."""
    root.mkdir(parents=True, exist_ok=True)
    results = root / "results.json"
    (root / "run.log").write_text("bench: measuring\n", encoding="utf-8")
    if status == "ok":
        results.write_text(dumps(cases) if results_text is None else results_text, encoding="utf-8")
    if telemetry == "csv":
        (root / "telemetry.csv").write_text("timestamp,index,sm_clock_mhz,mem_clock_mhz,temp_c,power_w,util_pct,"
                                            "mem_used_mib\n2026-11-30T01:00:01+00:00,0,1980,3201,41,310,97,1024\n")
    elif telemetry == "err":
        (root / "telemetry.err").write_text("nvidia-smi: not found\n")
    ident = dict(ident if ident is not None else identity())
    write_identity(root / IDENTITY_FILE, ident)
    exit_code = 0 if status == "ok" else 3
    manifest: dict[str, Any] = {
        "manifest_version": 1, "bundle_version": 1, "zlops_version": "0.1.0", "run_key": "run-1",
        "suite": "ops", "commit": "0" * 40, "pool": pool, "backend": "cuda", "device": device,
        "argv": ["python", "bench.py"], "results_file": str(results), "format": "zlops-json",
        "identity": ident, "status": status, "started_at": STARTED, "ended_at": ENDED, "exit_code": exit_code,
        "error": None if status == "ok" else "benchmark exited with code 3",
        **(manifest_extra or {}),
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    timing = {"timing_version": 1, "status": status, "started_at": STARTED, "ended_at": ENDED, "lock_wait_s": 0.0,
              "duration_s": 150.0, "exit_code": exit_code, "timeout_s": 3600, **(timing_extra or {})}
    (root / "timing.json").write_text(json.dumps(timing, indent=2), encoding="utf-8")
    return root
