"""zlops.judge.ab.compare_bundles and `zlops ab`: caliber first, pairing, fallback marks, SWITCH_NO_IR_DIFF."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from bundle_factory import case, identity, make_bundle

from zlops.cli import main
from zlops.config.settings import SuiteConfig
from zlops.errors import ParseError, ZlopsError
from zlops.judge.ab import NO_IR_DIFF, AbRefused, case_slug, compare_bundles, fingerprint, render_ab
from zlops.model import Verdict
from zlops.run.runner import ShardSpec, run_shard

BASE = [1.00, 1.01, 0.99, 1.00, 1.02]


def _ab(tmp_path: Path, a_cases: list, b_cases: list, *, a_ident: dict | None = None,
        b_ident: dict | None = None) -> tuple[Path, Path]:
    return (make_bundle(tmp_path / "A", a_cases, ident=a_ident), make_bundle(tmp_path / "B", b_cases, ident=b_ident))


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["ab", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


# --- caliber -----------------------------------------------------------------------------------------

def test_a_caliber_mismatch_exits_4_naming_each_axis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _ab(tmp_path, [case("x", BASE)], [case("x", BASE)],
               b_ident=identity(timer="direct", bench_level="comprehensive", tuner_cache="shared"))
    code, out, err = _cli(capsys, str(a), str(b))
    assert code == 4
    assert "!!! [caliber] timer: 'graph' != 'direct'" in out
    assert "!!! [caliber] bench_level: 'core' != 'comprehensive'" in out
    assert "!!! [caliber] tuner_cache: 'inherited' != 'shared'" in out
    assert sum(line.startswith("!!! [caliber]") for line in out.splitlines()) == 3
    assert "Overall" not in out and "refused" in err


def test_refusal_comes_before_any_latency_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_bundle(tmp_path / "A", [case("x", BASE)])
    b = make_bundle(tmp_path / "B", results_text="{ garbled", ident=identity(timer="direct"))
    with pytest.raises(AbRefused):
        compare_bundles([a], [b])
    assert _cli(capsys, str(a), str(b))[0] == 4
    with pytest.raises(ParseError, match=r"B/results\.json"):  # allowed: now the garbled file is read
        compare_bundles([a], [b], allow_caliber_mismatch=True)


def test_allowed_mismatch_still_prints_what_it_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _ab(tmp_path, [case("x", BASE)], [case("x", BASE)], b_ident=identity(direct_repeat=5))
    code, out, _ = _cli(capsys, str(a), str(b), "--allow-caliber-mismatch")
    assert code == 0
    assert "!!! [caliber] direct_repeat: 1 != 5" in out
    assert "comparison allowed by --allow-caliber-mismatch" in out
    assert "Overall: 0 of 1 cases improved, 0 regressed" in out


def test_both_sides_recording_autotune_is_refused_by_name(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _ab(tmp_path, [case("x", BASE)], [case("x", BASE)], a_ident=identity(autotune_mode="record"),
               b_ident=identity(autotune_mode="record"))
    code, out, _ = _cli(capsys, str(a), str(b))
    assert code == 4
    assert "!!! [caliber] both sides record autotune" in out


def test_record_pinning_a_replay_passes(tmp_path: Path) -> None:
    a, b = _ab(tmp_path, [case("x", BASE)], [case("x", BASE)], a_ident=identity(autotune_mode="record"))
    report = compare_bundles([a], [b])
    assert not report.caliber.refused and len(report.pairs) == 1


def test_recording_on_a_shared_tuner_cache_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _ab(tmp_path, [case("x", BASE)], [case("x", BASE)],
               a_ident=identity(autotune_mode="record", tuner_cache="shared"), b_ident=identity(tuner_cache="shared"))
    code, out, _ = _cli(capsys, str(a), str(b))
    assert code == 0
    assert "warning [caliber] A records autotune on a shared tuner cache" in out
    assert "!!!" not in out


def test_a_missing_identity_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _ab(tmp_path, [case("x", BASE)], [case("x", BASE)])
    (b / "run_identity.json").unlink()
    code, out, _ = _cli(capsys, str(a), str(b))
    assert code == 4
    assert f"!!! [caliber] missing run identity: B ({b / 'run_identity.json'})" in out


def test_the_shards_of_one_side_must_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_bundle(tmp_path / "A" / "h200" / "0", [case("x", BASE)])
    make_bundle(tmp_path / "A" / "h200" / "1", [case("x", BASE)], ident=identity(device_model="NVIDIA H100"),
                device=1)
    b = make_bundle(tmp_path / "B", [case("x", BASE)])
    code, out, _ = _cli(capsys, str(tmp_path / "A"), str(b))
    assert code == 4
    assert ("!!! [caliber] A shards disagree on device_model: 'NVIDIA H200' (A:h200/0) != 'NVIDIA H100' (A:h200/1)"
            in out)


def test_real_run_shard_bundles_on_different_timers_are_refused(tmp_path: Path) -> None:
    """Two bundles written by run_shard, each harness declaring its timer in {artifacts}/run_identity.json."""
    def shard(side: str, timer: str) -> Path:
        worktree = tmp_path / f"wt-{side}"
        worktree.mkdir()
        (worktree / "bench.py").write_text(
            "import json, sys\n"
            f"json.dump({{'timer': '{timer}'}}, open(sys.argv[2] + '/run_identity.json', 'w'))\n"
            "json.dump({'schema_version': 1, 'cases': [{'name': 'softmax', 'metric': 'latency', 'unit': 'ms',"
            f" 'samples': [1.0, 1.1, 1.05], 'params': {{'timer': '{timer}'}}}}]}}, open(sys.argv[1], 'w'))\n")
        suite = SuiteConfig(repo=str(tmp_path / "up"), format="zlops-json", pools=["p"], rounds=3, timeout_s=60,
                            command=["python", "bench.py", "{results}", "{artifacts}"])
        spec = ShardSpec(run_key=side, suite_name="s", suite=suite, sha="0" * 40, pool="p", backend="cpu", device=0,
                         worktree=worktree, venv=Path(sys.prefix), artifact_dir=tmp_path / side / "p" / "0")
        run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0, telemetry_interval_s=0.05)
        return tmp_path / side

    a, b = shard("A", "graph"), shard("B", "direct")
    with pytest.raises(AbRefused) as refused:
        compare_bundles([a], [b])
    assert refused.value.caliber.mismatches == (("timer", "graph", "direct"),)
    report = compare_bundles([a], [b], allow_caliber_mismatch=True)
    assert [(p.case, p.fallback) for p in report.pairs] == [("softmax", True)]
    assert compare_bundles([a], [shard("C", "graph")]).pairs[0].fallback is False


# --- pairing ---------------------------------------------------------------------------------------

def test_only_rows_successful_on_both_sides_with_a_positive_value_count(tmp_path: Path) -> None:
    a, b = _ab(tmp_path,
               [case("x", BASE), case("y", BASE), case("gone", BASE), case("z", [0.0, 0.0])],
               [case("x", [v * 1.1 for v in BASE]), case("y", [0.0, 0.0, 0.0]), case("new", BASE), case("z", BASE)])
    report = compare_bundles([a], [b])
    assert [(p.case, p.metric) for p in report.pairs] == [("x", "latency")]
    assert report.only_a == (("gone", "latency"),) and report.only_b == (("new", "latency"),)
    assert [k for k, _ in report.not_counted] == [("y", "latency"), ("z", "latency")]
    assert "non-positive median (A 1, B 0)" in dict(report.not_counted)[("y", "latency")]
    text = render_ab(report)
    assert "Not counted: 1 only in A, 1 only in B, 2 not comparable" in text
    assert "range +10.0%..+10.0% over 1 pair" in text


def test_a_failed_shard_contributes_no_rows_and_is_said(tmp_path: Path) -> None:
    make_bundle(tmp_path / "A" / "p" / "0", [case("x", BASE), case("y", BASE)])
    make_bundle(tmp_path / "B" / "p" / "0", [case("x", BASE)])
    make_bundle(tmp_path / "B" / "p" / "1", status="failed", device=1)
    report = compare_bundles([tmp_path / "A"], [tmp_path / "B"])
    assert [p.case for p in report.pairs] == ["x"] and report.only_a == (("y", "latency"),)
    assert report.shard_notes == ("B:p/1: shard failed, no rows (benchmark exited with code 3)",)


def test_shards_of_a_side_are_pooled(tmp_path: Path) -> None:
    make_bundle(tmp_path / "A" / "p" / "0", [case("x", [1.0, 1.0])])
    make_bundle(tmp_path / "A" / "p" / "1", [case("x", [1.0])], device=1)
    b = make_bundle(tmp_path / "B", [case("x", [1.2, 1.2, 1.2])])
    (pair,) = compare_bundles([tmp_path / "A"], [b]).pairs
    assert pair.base == (1.0, 1.0, 1.0) and pair.change_pct == pytest.approx(20.0)


def test_a_regression_gets_a_verdict_p_and_ci(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _ab(tmp_path, [case("slow", BASE), case("fast", BASE), case("same", BASE)],
               [case("slow", [v * 1.08 for v in BASE]), case("fast", [v * 0.9 for v in BASE]), case("same", BASE)])
    report = compare_bundles([a], [b])
    by_case = {p.case: p for p in report.pairs}
    assert by_case["slow"].verdict is Verdict.REGRESSION and by_case["fast"].verdict is Verdict.IMPROVED
    assert by_case["same"].verdict is Verdict.UNCHANGED and by_case["same"].p_value == 1.0
    assert by_case["slow"].p_value is not None and by_case["slow"].p_value < 0.05
    lo, hi = by_case["slow"].ratio_ci  # type: ignore[misc]
    assert 1.0 < lo <= 1.08 <= hi
    code, out, _ = _cli(capsys, str(a), str(b))
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("Case"))
    assert header.split() == ["Case", "Base", "HEAD", "Delta", "Change", "%", "Verdict", "Notes"]
    assert "!! REGRESSION" in out and "improved" in out
    assert "range -10.0%..+8.0% over 3 pairs" in out
    assert out.rstrip().endswith("Overall: 1 of 3 cases improved, 1 regressed")


def test_single_samples_get_no_test(tmp_path: Path) -> None:
    a, b = _ab(tmp_path, [case("x", [1.0])], [case("x", [1.1])])
    (pair,) = compare_bundles([a], [b]).pairs
    assert pair.p_value is None and pair.ratio_ci is None and "n<2 on a side: no test" in pair.notes


def test_fallback_rows_are_annotated_in_row_and_range(tmp_path: Path) -> None:
    a, b = _ab(tmp_path, [case("dropout", BASE, timer="graph"), case("sort", BASE, timer="graph"),
                          case("tanh", BASE, timer="graph")],
               [case("dropout", BASE, timer="direct", fallback="capture refused: RuntimeError: current_seed"),
                case("sort", BASE, timer="direct"), case("tanh", BASE, timer="graph")])
    report = compare_bundles([a], [b])
    assert [p.fallback for p in report.pairs] == [True, True, False]
    dropout = report.pairs[0]
    assert "B fell back to the direct timer: capture refused: RuntimeError: current_seed" in dropout.notes
    assert "timer graph vs direct" in report.pairs[1].notes
    assert report.range_line() == "range +0.0%..+0.0% over 3 pairs (2 pairs include a direct-timer fallback)"


def test_a_side_that_measured_nothing_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _ab(tmp_path, [case("x", BASE)], [])
    with pytest.raises(ZlopsError, match="side B measured nothing"):
        compare_bundles([a], [b])
    code, _, err = _cli(capsys, str(a), str(b))
    assert code == 1 and "measured nothing" in err


def test_no_pair_at_all_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _ab(tmp_path, [case("x", BASE)], [case("y", BASE)])
    code, out, err = _cli(capsys, str(a), str(b))
    assert code == 1
    assert "range: no pair succeeded on both sides" in out and "nothing was compared" in err


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _ab(tmp_path, [case("x", BASE)], [case("x", BASE)], b_ident=identity(shape_mode="quick"))
    code, out, _ = _cli(capsys, str(a), str(b), "--json")
    assert code == 4
    data = json.loads(out)
    assert data["refused"] is True
    assert data["caliber"]["mismatches"] == [{"axis": "shape_mode", "a": "upstream", "b": "quick"}]
    code, out, _ = _cli(capsys, str(a), str(b), "--json", "--allow-caliber-mismatch")
    data = json.loads(out)
    assert code == 0 and data["pairs"][0]["case"] == "x" and data["caliber"]["allowed"] is True


# --- SWITCH_NO_IR_DIFF -------------------------------------------------------------------------------

def _ir(bundle: Path, case_key: str | None, files: dict[str, str]) -> None:
    root = bundle / "cases" / case_slug(case_key) if case_key else bundle / "ir"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


IR_CASES = ["mm/float16/(64x64)", "mm/float16/(128x128)", "mm/float16/(256x256)", "mm/float16/(512x512)"]


def _ir_ab(tmp_path: Path) -> tuple[Path, Path]:
    a, b = _ab(tmp_path, [case(c, BASE) for c in IR_CASES], [case(c, [v * 1.01 for v in BASE]) for c in IR_CASES])
    same, changed, more, _without_artifacts = IR_CASES
    for bundle in (a, b):
        _ir(bundle, same, {"k0.ttgir": "module { same }", "index.json": "differs" + bundle.name})
    _ir(a, changed, {"k0.ttgir": "module { rlc off }"})
    _ir(b, changed, {"k0.ttgir": "module { rlc on }"})
    _ir(a, more, {"k0.ttgir": "module { k0 }"})  # same content, but B compiled a second variant
    _ir(b, more, {"k0.ttgir": "module { k0 }", "k1.ttgir": "module { k1 }"})
    return a, b


def test_byte_identical_ir_is_skipped_as_switch_no_ir_diff(tmp_path: Path) -> None:
    a, b = _ir_ab(tmp_path)
    report = compare_bundles([a], [b], fingerprint_globs=("**/*.ttgir",))
    assert report.no_ir_diff == (("mm/float16/(64x64)", "latency"),)
    counted = {p.case: p.notes for p in report.pairs}
    assert set(counted) == {"mm/float16/(128x128)", "mm/float16/(256x256)", "mm/float16/(512x512)"}
    assert "no build artifacts on A and B" in counted["mm/float16/(512x512)"]
    assert f"{NO_IR_DIFF}: 1 skipped" in render_ab(report)


def test_without_fingerprint_globs_nothing_is_skipped(tmp_path: Path) -> None:
    a, b = _ir_ab(tmp_path)
    assert len(compare_bundles([a], [b]).pairs) == 4


def test_no_ir_diff_override(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _ir_ab(tmp_path)
    report = compare_bundles([a], [b], fingerprint_globs=("**/*.ttgir",), allow_no_ir_diff=True)
    assert report.no_ir_diff == () and len(report.pairs) == 4
    assert [p.case for p in report.pairs if f"{NO_IR_DIFF} (allowed)" in p.notes] == ["mm/float16/(64x64)"]
    code, out, _ = _cli(capsys, str(a), str(b), "--fingerprint", "**/*.ttgir")
    assert code == 0 and f"{NO_IR_DIFF}: 1 skipped" in out and "over 3 pairs" in out
    monkeypatch.setenv("SWITCH_ALLOW_NO_IR_DIFF", "1")
    code, out, _ = _cli(capsys, str(a), str(b), "--fingerprint", "**/*.ttgir")
    assert code == 0 and f"{NO_IR_DIFF}: " not in out and "over 4 pairs" in out


def test_whole_bundle_fingerprint_applies_to_every_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _ab(tmp_path, [case("x", BASE), case("y", BASE)], [case("x", BASE), case("y", BASE)])
    for bundle in (a, b):
        _ir(bundle, None, {"triton/abc/k.ttgir": "module { k }"})
    report = compare_bundles([a], [b], fingerprint_globs=("**/*.ttgir",))
    assert report.no_ir_diff == (("x", "latency"), ("y", "latency")) and report.pairs == ()
    code, out, _ = _cli(capsys, str(a), str(b), "--fingerprint", "**/*.ttgir")
    assert code == 0 and f"{NO_IR_DIFF}: 2 skipped" in out  # a deliberate skip, not "nothing measured"
    (b / "ir" / "triton" / "abc" / "k.ttgir").write_text("module { k, changed }")
    assert len(compare_bundles([a], [b], fingerprint_globs=("**/*.ttgir",)).pairs) == 2


def test_fingerprint_counts_paths_and_content() -> None:
    assert fingerprint([]) is None
    base = fingerprint([("a.ttgir", "1")])
    assert base == fingerprint([("a.ttgir", "1"), ("a.ttgir", "1")])
    assert base != fingerprint([("b.ttgir", "1")]) and base != fingerprint([("a.ttgir", "2")])
    assert base != fingerprint([("a.ttgir", "1"), ("b.ttgir", "1")])
