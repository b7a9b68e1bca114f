"""run_shard with ``kernels: triton``: the benchmark gets a cache of its own, the shard gets kernels.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from zlops.config.settings import SuiteConfig
from zlops.kernels.inventory import read_inventory
from zlops.model import ShardStatus
from zlops.run.runner import ShardSpec, read_manifest, run_shard

SHA = "0123456789abcdef0123456789abcdef01234567"
HERE = Path(__file__).resolve().parents[1]

# a benchmark that "compiles" two kernels into $TRITON_CACHE_DIR, as Triton would
BENCH = f'''
import json, os, sys
sys.path.insert(0, {str(HERE)!r})
from triton_cache_factory import write_kernel
cache = os.environ.get("TRITON_CACHE_DIR")
print("CACHE", cache, flush=True)
if cache:
    write_kernel(__import__("pathlib").Path(cache), "amax_kernel", num_warps=int(sys.argv[2]))
    write_kernel(__import__("pathlib").Path(cache), "fill_scalar_kernel")
json.dump({{"schema_version": 1, "cases": [{{"name": "amax/f32", "metric": "latency", "unit": "ms",
           "lower_is_better": True, "samples": [1.0, 1.1]}}]}}, open(sys.argv[1], "w"))
'''


def _spec(tmp_path: Path, kernels: object, warps: int = 4, device: int = 0) -> ShardSpec:
    wt = tmp_path / "wt"
    wt.mkdir(exist_ok=True)
    (wt / "bench.py").write_text(BENCH)
    suite = SuiteConfig(repo=str(tmp_path), format="zlops-json", pools=["p"], kernels=kernels,
                        env={"TRITON_CACHE_DIR": "/should/be/replaced"} if kernels else {},
                        command=["python", "bench.py", "{results}", str(warps)])
    return ShardSpec(run_key="r1", suite_name="s", suite=suite, sha=SHA, pool="p", backend="cpu", device=device,
                     worktree=wt, venv=Path(sys.prefix), artifact_dir=tmp_path / "art" / "p" / str(device))


def test_shard_records_the_kernels_its_process_compiled(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "triton")
    out = run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0, telemetry_interval_s=0.05)
    assert out.status is ShardStatus.OK
    cache = spec.artifact_dir / "triton_cache"
    assert f"CACHE {cache}" in (spec.artifact_dir / "run.log").read_text()
    inv = read_inventory(spec.artifact_dir)
    assert inv is not None and inv.provider == "triton" and inv.state == "ok"
    assert sorted((k.name, k.compiled) for k in inv.kernels) == [("amax_kernel", True), ("fill_scalar_kernel", True)]
    manifest = read_manifest(spec.artifact_dir)
    assert manifest is not None and manifest["kernels"] == "triton: 2 kernels (2 compiled here, 0 reused)"
    assert manifest["env_added"]["TRITON_CACHE_DIR"] == str(cache)
    # the same shard again: its kernels are now in the cache before it starts, so they are reused
    run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0, telemetry_interval_s=0.05)
    again = read_inventory(spec.artifact_dir)
    assert again is not None and {k.compiled for k in again.kernels} == {False}


def test_suite_without_kernels_gets_no_cache_and_no_inventory(tmp_path: Path) -> None:
    spec = _spec(tmp_path, None)
    assert run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0).status is ShardStatus.OK
    assert "CACHE None" in (spec.artifact_dir / "run.log").read_text()
    assert read_inventory(spec.artifact_dir) is None and not (spec.artifact_dir / "triton_cache").exists()


def test_declared_provider_without_reader_records_no_inventory(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"provider": "cuobjdump"})
    run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0)
    data = json.loads((spec.artifact_dir / "kernels.json").read_text())
    assert data["state"] == "none" and "cuobjdump" in data["reason"] and data["kernels"] == []


def test_config_refuses_unknown_provider_and_bad_regex(tmp_path: Path) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="unknown kernel provider 'nvcc'"):
        _spec(tmp_path, "nvcc")
    with pytest.raises(ValidationError, match="is not a regular expression"):
        _spec(tmp_path, {"map": {"mean(": "x"}})
    assert _spec(tmp_path, "triton").suite.kernels.provider == "triton"  # type: ignore[union-attr]


def test_bundle_verify_reads_the_inventory(tmp_path: Path) -> None:
    from zlops.run.bundle import verify_bundle

    spec = _spec(tmp_path, "triton")
    run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0, telemetry_interval_s=0.05)
    assert verify_bundle(spec.artifact_dir).ok
    (spec.artifact_dir / "kernels.json").write_text('{"schema_version": 99}')
    report = verify_bundle(spec.artifact_dir)
    assert not report.ok and any("schema_version 99" in p for p in report.problems)
    (spec.artifact_dir / "kernels.json").unlink()
    assert any("kernels.json is missing" in p for p in verify_bundle(spec.artifact_dir).problems)


def test_repeated_runs_of_a_commit_share_one_cache(tmp_path: Path) -> None:
    from dataclasses import replace

    shared = tmp_path / "run" / "kernel_cache" / "0123456789ab-p-0"
    first = replace(_spec(tmp_path, "triton"), kernel_cache=shared, artifact_dir=tmp_path / "ab" / "00A")
    second = replace(first, artifact_dir=tmp_path / "ab" / "01A")
    for spec in (first, second):
        assert run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0).status is ShardStatus.OK
    a, b = read_inventory(first.artifact_dir), read_inventory(second.artifact_dir)
    assert a is not None and b is not None
    assert {k.compiled for k in a.kernels} == {True} and {k.compiled for k in b.kernels} == {False}
    assert [k.code_hash for k in a.kernels] == [k.code_hash for k in b.kernels]
    assert not (first.artifact_dir / "triton_cache").exists()
