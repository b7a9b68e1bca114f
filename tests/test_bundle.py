"""zlops.run.bundle.verify_bundle and `zlops bundle verify`: what a shard bundle must hold."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from bundle_factory import case, identity, make_bundle

from zlops.cli import main
from zlops.config.settings import SuiteConfig
from zlops.errors import ZlopsError
from zlops.run.bundle import find_bundles, verify_bundle
from zlops.run.runner import ShardSpec, run_shard

CASES = [case("softmax/float16/(4096)", [1.20, 1.21, 1.19]), case("add/float32/(64x64)", [0.05, 0.051])]

FLAGGEMS_LOG = "\n".join([
    "[INFO] Benchmark record logger enabled",
    ('[INFO] {"op_name": "abs", "dtype": "torch.float16", "mode": "kernel", "level": "core", "result": ['
     '{"shape_detail": [[64, 64]], "latency_base": 0.0051, "latency": 0.0071, "speedup": 0.72, "tflops": null, '
     '"gbps": null, "gbps_base": null, "accuracy": null, "utilization": null, "compared_speedup": null, '
     '"legacy_shape": null, "error_msg": null}, '
     '{"shape_detail": [[1024, 1024]], "latency_base": null, "latency": null, "speedup": null, "tflops": null, '
     '"gbps": null, "gbps_base": null, "accuracy": null, "utilization": null, "compared_speedup": null, '
     '"legacy_shape": null, "error_msg": "RuntimeError: out of resource"}]}'),
]) + "\n"


def test_a_complete_bundle_is_ok(tmp_path: Path) -> None:
    report = verify_bundle(make_bundle(tmp_path / "b", CASES))
    assert report.ok, report.problems
    assert (report.status, report.cases, report.dropped, report.warnings) == ("ok", 2, 0, ())


def test_telemetry_err_stands_in_for_the_csv(tmp_path: Path) -> None:
    assert verify_bundle(make_bundle(tmp_path / "b", CASES, telemetry="err")).ok


@pytest.mark.parametrize(("missing", "said"), [
    ("run.log", "run.log is missing"),
    ("run_identity.json", "run_identity.json is missing"),
    ("timing.json", "timing.json is missing"),
    ("results.json", "results file results.json is missing although status is ok"),
    ("telemetry.csv", "neither telemetry.csv nor telemetry.err"),
])
def test_a_missing_file_is_a_problem_naming_it(tmp_path: Path, missing: str, said: str) -> None:
    bundle = make_bundle(tmp_path / "b", CASES)
    (bundle / missing).unlink()
    report = verify_bundle(bundle)
    assert not report.ok
    assert [p for p in report.problems if said in p], report.problems


def test_a_missing_manifest_is_a_problem(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b", CASES)
    (bundle / "manifest.json").unlink()
    assert verify_bundle(bundle).problems == ("manifest.json is missing",)


def test_a_newer_bundle_version_is_refused_clearly(tmp_path: Path) -> None:
    report = verify_bundle(make_bundle(tmp_path / "b", CASES, manifest_extra={"bundle_version": 2}))
    assert report.problems == ("bundle_version 2 is newer than this zlops reads (1); upgrade zlops",)


def test_an_unversioned_bundle_is_a_problem(tmp_path: Path) -> None:
    report = verify_bundle(make_bundle(tmp_path / "b", CASES, manifest_extra={"bundle_version": None}))
    assert any("no integer bundle_version" in p for p in report.problems)


def test_status_ok_with_no_case_is_a_failure_not_an_empty_success(tmp_path: Path) -> None:
    report = verify_bundle(make_bundle(tmp_path / "b", []))
    assert not report.ok and report.cases == 0
    assert any("holds no case result" in p and "measured nothing" in p for p in report.problems)


def test_a_garbled_results_file_is_a_problem_with_file_and_line(tmp_path: Path) -> None:
    text = '{"schema_version": 1,\n "cases": [{"name": "softmax", "metric": "latency", "unit": "ms", "samp'
    report = verify_bundle(make_bundle(tmp_path / "b", results_text=text))
    assert not report.ok
    (problem,) = report.problems
    assert problem.startswith("results file does not parse as zlops-json: ")
    assert "results.json:" in problem


def test_partial_results_say_how_much_was_dropped(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b", results_text=FLAGGEMS_LOG, manifest_extra={"format": "flaggems-record"})
    report = verify_bundle(bundle)
    assert report.ok, report.problems
    assert report.dropped == 1 and report.cases == 3  # latency, latency_base, speedup of the one good row
    assert report.warnings == ("partial results: the flaggems-record parser dropped 1 item(s) (error_row 1)",)


def test_a_failed_shard_is_a_complete_bundle_with_a_warning(tmp_path: Path) -> None:
    report = verify_bundle(make_bundle(tmp_path / "b", status="failed"))
    assert report.ok, report.problems
    assert report.warnings == ("shard failed: benchmark exited with code 3",)


def test_an_ok_shard_with_a_non_zero_exit_is_a_problem_unless_the_suite_accepted_the_code(tmp_path: Path) -> None:
    note = "partial: the benchmark exited with code 1 (the suite's partial_exit_codes): ..."
    crashed = make_bundle(tmp_path / "a", CASES, manifest_extra={"exit_code": 1}, timing_extra={"exit_code": 1})
    assert "status ok but exit_code 1" in verify_bundle(crashed).problems
    partial = make_bundle(tmp_path / "b", CASES, manifest_extra={"exit_code": 1, "partial_exit_codes": [1],
                                                                  "error": note}, timing_extra={"exit_code": 1})
    report = verify_bundle(partial)
    assert report.ok, report.problems
    assert note in report.warnings
    other = make_bundle(tmp_path / "c", CASES, manifest_extra={"exit_code": 2, "partial_exit_codes": [1]},
                        timing_extra={"exit_code": 2})
    assert "status ok but exit_code 2" in verify_bundle(other).problems


def test_a_shard_that_never_finished_is_a_problem(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b", CASES, manifest_extra={"status": "running"},
                         timing_extra={"status": "running"})
    assert any("never finished" in p for p in verify_bundle(bundle).problems)


def test_an_identity_without_caliber_axes_is_a_problem(tmp_path: Path) -> None:
    ident = {k: v for k, v in identity().items() if k not in ("timer", "tuner_cache")}
    report = verify_bundle(make_bundle(tmp_path / "b", CASES, ident=ident))
    assert report.problems == ("manifest.json key identity lacks caliber axes: timer, tuner_cache",
                               "run_identity.json lacks caliber axes: timer, tuner_cache")


def test_a_deleted_manifest_identity_is_a_problem(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b", CASES)
    manifest = json.loads((bundle / "manifest.json").read_text())
    del manifest["identity"]
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    assert verify_bundle(bundle).problems == (
        "manifest.json key identity is missing: the shard's caliber was deleted or never recorded",)


@pytest.mark.parametrize(("value", "said"), [
    (None, "manifest.json key identity is null: the shard's caliber is unknown"),
    ("cuda", "manifest.json key identity: expected a JSON object, got str"),
    ({"backend": "cuda"}, ("manifest.json key identity lacks caliber axes: device_model, driver, toolkit, timer, "
                          "direct_repeat, rounds, bench_level, shape_mode, tuner_cache, pins, framework")),
])
def test_a_null_or_stripped_manifest_identity_is_a_problem(tmp_path: Path, value: object, said: str) -> None:
    report = verify_bundle(make_bundle(tmp_path / "b", CASES, manifest_extra={"identity": value}))
    assert report.problems == (said,)


def test_an_identity_of_another_backend_is_a_problem(tmp_path: Path) -> None:
    ident = identity(backend="ascend")
    report = verify_bundle(make_bundle(tmp_path / "b", CASES, ident=ident))
    assert report.problems == ("run_identity.json key backend 'ascend' disagrees with manifest.json key backend 'cuda'",
                               ("manifest.json key identity.backend 'ascend' disagrees with manifest.json key "
                               "backend 'cuda'"))
    # an alias of the same backend agrees
    assert verify_bundle(make_bundle(tmp_path / "c", CASES, manifest_extra={"backend": "nvidia"})).ok


def test_a_bundle_filed_under_another_pool_or_device_is_a_problem(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "run" / "h200" / "3", CASES, device=1)
    assert verify_bundle(bundle).problems == ("manifest.json key device 1 disagrees with the bundle's folder 3/",)
    other = make_bundle(tmp_path / "run" / "a100" / "0", CASES)
    assert verify_bundle(other).problems == (
        "manifest.json key pool 'h200' disagrees with the bundle's folder a100/0/",)
    bad = make_bundle(tmp_path / "x", CASES, manifest_extra={"pool": None, "device": "0"})
    assert verify_bundle(bad).problems == ("manifest.json key pool None is not a pool name",
                                           "manifest.json key device '0' is not a device index")


def test_a_garbled_identity_is_a_problem(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b", CASES)
    (bundle / "run_identity.json").write_text('{"backend": "cu')
    assert verify_bundle(bundle).problems == ("run_identity.json is not a JSON object (truncated or garbled?)",)


def test_identity_file_and_manifest_must_agree(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b", CASES, manifest_extra={"identity": identity(timer="direct")})
    (problem,) = verify_bundle(bundle).problems
    assert "disagrees with the manifest's identity on timer ('direct' in manifest, 'graph' in file)" in problem


def test_timing_must_agree_with_the_manifest(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b", CASES, timing_extra={"status": "failed", "duration_s": 12.0})
    problems = verify_bundle(bundle).problems
    assert "timing.json status 'failed' disagrees with manifest.json ('ok')" in problems
    assert any("duration_s 12 disagrees with ended_at - started_at (150 s)" in p for p in problems)


def test_a_newer_timing_version_is_a_problem(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b", CASES, timing_extra={"timing_version": 2})
    assert verify_bundle(bundle).problems == ("timing.json timing_version 2 is not one this zlops reads (1)",)


def test_find_bundles_takes_a_bundle_or_a_run_dir(tmp_path: Path) -> None:
    a = make_bundle(tmp_path / "run" / "h200" / "0", CASES)
    b = make_bundle(tmp_path / "run" / "h200" / "1", CASES, device=1)
    assert find_bundles(a) == [a]
    assert find_bundles(tmp_path / "run") == [a, b]
    with pytest.raises(ZlopsError, match="no shard bundle"):
        find_bundles(tmp_path / "nothing")


def test_a_bundle_written_by_run_shard_verifies(tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / "bench.py").write_text(
        "import json, sys\n"
        "json.dump({'schema_version': 1, 'cases': [{'name': 'softmax', 'metric': 'latency', 'unit': 'ms',"
        " 'samples': [1.0, 1.1], 'params': {'timer': 'direct'}}]}, open(sys.argv[1], 'w'))\n")
    suite = SuiteConfig(repo=str(tmp_path / "up"), format="zlops-json", pools=["p"], rounds=2, timeout_s=60,
                        command=["python", "bench.py", "{results}"])
    spec = ShardSpec(run_key="r", suite_name="s", suite=suite, sha="0" * 40, pool="p", backend="cpu", device=0,
                     worktree=worktree, venv=Path(sys.prefix), artifact_dir=tmp_path / "run" / "p" / "0")
    run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0, telemetry_interval_s=0.05)
    report = verify_bundle(spec.artifact_dir)
    assert report.ok, report.problems
    assert report.cases == 1


def test_cli_verify_prints_each_problem_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = make_bundle(tmp_path / "run" / "h200" / "0", CASES)
    bad = make_bundle(tmp_path / "run" / "h200" / "1", [], device=1)
    (bad / "run.log").unlink()
    assert main(["bundle", "verify", str(tmp_path / "run")]) == 1
    out = capsys.readouterr().out
    assert f"ok  {good} (status ok; 2 case results)" in out
    assert f"BAD  {bad}" in out
    assert "  problem: run.log is missing" in out
    assert "  problem: status ok but results file results.json holds no case result" in out
    assert out.rstrip().endswith("1 of 2 bundles ok, 1 with problems")


def test_cli_verify_ok_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_bundle(tmp_path / "a", CASES)
    assert main(["bundle", "verify", str(a)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("1 of 1 bundles ok")
    assert main(["bundle", "verify", str(a), str(tmp_path / "missing"), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False
    assert [b["ok"] for b in data["bundles"]] == [True, False]
    assert "no shard bundle" in data["bundles"][1]["problems"][0]


def test_a_results_file_linked_from_outside_the_bundle_is_refused(tmp_path: Path) -> None:
    """The bundle's results file is read as ingest reads a shard's: a link out of the bundle is not data."""
    bundle = make_bundle(tmp_path / "b", CASES)
    outside = tmp_path / "elsewhere.json"
    (bundle / "results.json").rename(outside)
    (bundle / "results.json").symlink_to(outside)
    said = (f"results file does not parse as zlops-json: {bundle / 'results.json'}: the results file is a symlink "
            f"leading out of the shard folder {bundle} (to {outside}); the benchmark must write a regular file there")
    assert verify_bundle(bundle).problems == (said,)
