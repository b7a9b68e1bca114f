"""A harness that names its results file itself (``results_glob``, FlagGems' ``result_<argv>.log``): it runs
in the shard's artifact folder and its one file there becomes ``{results}``; and the timer the shard's
run_identity.json records (``timer:``, the format's own word, the backend's default)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from zlops.config.settings import SuiteConfig
from zlops.identity import IDENTITY_FILE, TIMER_SOURCES, build_identity, read_identity, resolve_timer
from zlops.model import ShardStatus
from zlops.run.runner import ShardSpec, read_manifest, run_shard

SHA = "0123456789abcdef0123456789abcdef01234567"
DATA = Path(__file__).parent / "data" / "flaggems"
RECORD = DATA / "result-m_abs-sv--level_core--record_log.log"

# writes FlagGems' record log the way benchmark/conftest.py names it: from its argv, into its cwd
HARNESS = r'''
import os, shutil, sys
args = sys.argv[1:]
mode = args[0].lstrip("-")
name = "result_{}.log".format("_".join(a.replace(".py", "").replace("=", "_").replace("/", "_") for a in args))
name = name.replace("_-", "-")
if mode in ("one", "two", "one_failed"):
    shutil.copy(os.environ["RECORD_SRC"], name)
if mode == "two":
    shutil.copy(os.environ["RECORD_SRC"], "result_other.log")
print("cwd", os.getcwd())
if mode.endswith("_failed"):  # pytest's exit after a failed test (FlagGems: another dtype's parametrization)
    print("2 failed, 3 passed"); sys.exit(1)
'''


def _spec(tmp_path: Path, mode: str, **suite_kw: Any) -> ShardSpec:
    worktree = tmp_path / "worktree"
    worktree.mkdir(exist_ok=True)
    (worktree / "harness.py").write_text(HARNESS)
    suite = SuiteConfig.model_validate({
        "repo": str(tmp_path / "up"), "format": "flaggems-record", "pools": ["p"],
        "command": ["python", "{worktree}/harness.py", mode, "-m", "{cases}", "--record", "log"],
        "select": {"token": "^([^/]+)/", "join": " or "}, "results_glob": "result*.log",
        "results_name": "flaggems_record.log", "env": {"RECORD_SRC": str(RECORD)}, **suite_kw})
    return ShardSpec(run_key="run-1", suite_name="fg", suite=suite, sha=SHA, pool="p", backend="cpu", device=0,
                     worktree=worktree, venv=Path(sys.prefix), artifact_dir=tmp_path / "art",
                     cases=("abs/float16/(64x64)",))


def _run(spec: ShardSpec, tmp_path: Path) -> Any:
    return run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0, telemetry_interval_s=0.05)


def test_the_named_file_becomes_results_and_the_worktree_stays_clean(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "one")
    out = _run(spec, tmp_path)
    assert out.status is ShardStatus.OK, out.error
    assert spec.results_file.read_bytes() == RECORD.read_bytes()
    assert not list(spec.artifact_dir.glob("result_*.log")) and not list(spec.worktree.glob("result_*"))
    manifest = read_manifest(spec.artifact_dir)
    assert manifest is not None and manifest["cwd"] == str(spec.artifact_dir)
    assert manifest["argv"][3:5] == ["-m", "abs"]
    assert f"cwd {spec.artifact_dir}" in (spec.artifact_dir / "run.log").read_text()


def test_a_name_that_starts_with_an_option_is_found(tmp_path: Path) -> None:
    """FlagGems turns '_-' into '-': a first argument that is an option makes the name 'result-...'."""
    spec = _spec(tmp_path, "-one")
    out = _run(spec, tmp_path)
    assert out.status is ShardStatus.OK, out.error
    assert spec.results_file.read_bytes() == RECORD.read_bytes()


def test_no_matching_file_fails_the_shard_with_the_glob(tmp_path: Path) -> None:
    out = _run(_spec(tmp_path, "none"), tmp_path)
    assert out.status is ShardStatus.FAILED and "no file matching 'result*.log'" in (out.error or "")


def test_two_matching_files_fail_the_shard_naming_them(tmp_path: Path) -> None:
    out = _run(_spec(tmp_path, "two"), tmp_path)
    assert out.status is ShardStatus.FAILED and "2 files match" in (out.error or "")
    assert "result_other.log" in (out.error or "")


def test_a_stale_named_file_of_an_earlier_attempt_is_removed(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "none")
    spec.artifact_dir.mkdir(parents=True)
    (spec.artifact_dir / "result_stale.log").write_text("[INFO] old\n")
    out = _run(spec, tmp_path)
    assert out.status is ShardStatus.FAILED and not (spec.artifact_dir / "result_stale.log").exists()


def test_identity_records_flaggems_do_bench_not_the_backend_default(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "one")
    assert _run(spec, tmp_path).status is ShardStatus.OK
    ident = read_identity(spec.artifact_dir / IDENTITY_FILE)
    assert ident is not None and (ident["timer"], ident["timer_source"]) == ("triton.do_bench", "format")


def test_a_configured_timer_wins_over_the_format(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "one", timer="triton.do_bench_cudagraph")
    assert _run(spec, tmp_path).status is ShardStatus.OK
    ident = read_identity(spec.artifact_dir / IDENTITY_FILE)
    assert ident is not None and (ident["timer"], ident["timer_source"]) == ("triton.do_bench_cudagraph", "config")


def test_a_failed_shard_keeps_the_backend_timer(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "none")
    _run(spec, tmp_path)
    ident = json.loads((spec.artifact_dir / IDENTITY_FILE).read_text())
    assert (ident["timer"], ident["timer_source"]) == ("direct", "backend")  # the cpu backend's


def test_resolve_timer_order() -> None:
    assert resolve_timer(harness={"timer": "graph"}, configured="x", from_format="y", backend_default="z") == (
        "graph", "harness")
    assert resolve_timer(harness={"timer": None}, configured="x", from_format="y", backend_default="z") == (
        "x", "config")
    assert resolve_timer(harness=None, configured=None, from_format="y", backend_default="z") == ("y", "format")
    assert resolve_timer(harness={}, configured=None, from_format=None, backend_default="z") == ("z", "backend")
    assert TIMER_SOURCES == ("harness", "config", "format", "backend")
    ident = build_identity(backend_identity={"backend": "cuda", "timer": "graph"}, rounds=1, pins={},
                           format_timer="triton.do_bench")
    assert (ident["timer"], ident["timer_source"]) == ("triton.do_bench", "format")


def test_pytest_exit_1_keeps_the_written_record_only_where_the_suite_accepts_it_as_partial(tmp_path: Path) -> None:
    """FlagGems' test_amin is parametrized over three dtypes; with --dtypes float16 the other two raise and pytest
    exits 1 after every float16 result is written (hold-out 5 on an H200, 2026-12-04)."""
    for sub in "abc":
        (tmp_path / sub).mkdir()
    out = _run(_spec(tmp_path / "a", "one_failed"), tmp_path / "a")
    assert out.status is ShardStatus.FAILED and "exited with code 1" in (out.error or "")
    spec = _spec(tmp_path / "b", "one_failed", partial_exit_codes=[1])
    out = _run(spec, tmp_path / "b")
    assert out.status is ShardStatus.OK and (out.error or "").startswith("partial: the benchmark exited with code 1")
    assert spec.results_file.read_bytes() == RECORD.read_bytes()
    manifest = read_manifest(spec.artifact_dir)
    assert manifest is not None and manifest["exit_code"] == 1 and manifest["partial_exit_codes"] == [1]
    out = _run(_spec(tmp_path / "c", "none_failed", partial_exit_codes=[1]), tmp_path / "c")
    assert out.status is ShardStatus.FAILED and "no file matching 'result*.log'" in (out.error or "")


def test_partial_exit_codes_are_checked() -> None:
    base = {"repo": "/r", "format": "flaggems-record", "pools": ["p"], "command": ["python", "b.py"]}
    assert SuiteConfig.model_validate({**base, "partial_exit_codes": [2, 1, 1]}).partial_exit_codes == [1, 2]
    for bad in ([0], [256], [-1]):
        try:
            SuiteConfig.model_validate({**base, "partial_exit_codes": bad})
        except ValueError as exc:
            assert "not exit codes 1-255" in str(exc)
        else:
            raise AssertionError(f"{bad} accepted")
