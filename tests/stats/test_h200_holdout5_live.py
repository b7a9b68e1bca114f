"""Hold-out 5 on the H200 (tests/data/flaggems_h200/holdout5_2026-12-04/PROVENANCE.md): FlagGems amin, any and
maximum, never run by zlops before, production defaults plus the recipe's ``partial_exit_codes: [1]``.

What the record shows, re-derived here from the recorded processes and the nights' JSON:
- the ground truth, measured first with interleaved fresh ``-m amin`` processes: amin's wrapper launching its
  kernel once more over the first 524288 of the 2**20 rows of [1024, 1024, 1024] makes that shape +3.01% slower
  (2 + 2 processes, ranges apart); 393216 rows +2.27%, and the first lease's 65536/131072/196608 rows +0.41/+0.84/
  +1.17%: a dose-response, so the change is real and its size known before zlops saw a night;
- the first lease's nights got no results at all: FlagGems' ``test_amin`` is parametrized over three dtypes, the
  two not asked for (``--dtypes float16``) raise, pytest exits 1 after writing every float16 result, and zlops
  failed the shard (what ``partial_exit_codes`` now keeps); the record it threw away holds all 15 cases;
- eight nights of unchanged code on three machines: no loud verdict, no confirmed or announced alert; the two A/Bs
  that ran (14 runs each) cost within 8% of their estimate and within the 300 s floor, and said inconclusive,
  unmeasurable (bimodal process levels) or cleared, never `unchanged` without a decision.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
from pathlib import Path

import pytest

from zlops.formats import flaggems_record

ROOT = Path(__file__).resolve().parents[2]
REC = ROOT / "tests" / "data" / "flaggems_h200" / "holdout5_2026-12-04"
LOUD = {"improved", "potential", "regression", "severe"}
SLOWED = ("amin", "1024x1024x1024")

_spec = importlib.util.spec_from_file_location(
    "gt_summary", ROOT / "benchmarks" / "h200" / "holdout2_groundtruth_summary.py")
assert _spec is not None and _spec.loader is not None
gt_summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gt_summary)


@pytest.mark.parametrize(("folder", "expected"), [
    ("groundtruth1", {"W64k": 0.41, "W128k": 0.84, "W192k": 1.17}),
    ("groundtruth2", {"W384k": 2.27, "W512k": 3.01}),
])
def test_the_ground_truth_was_measured_first_and_every_candidate_is_apart(folder: str, expected: dict) -> None:
    by_label = gt_summary.latencies(REC / folder)[SLOWED]
    base = by_label["A"]
    assert len(base) == 2
    for label, pct in expected.items():
        runs = by_label[label]
        assert len(runs) == 2
        assert 100 * (statistics.median(runs) / statistics.median(base) - 1) == pytest.approx(pct, abs=0.005)
        assert min(runs) > max(base)   # every slowed process is slower than every process of A
    summary = (REC / folder / "gt5_summary.txt").read_text()
    assert "W512k" not in summary or "change picked: W512k -> origin/r524288" in summary


def test_the_first_lease_lost_a_whole_valid_record_to_pytest_exit_1() -> None:
    lease = REC / "lease1_exit1"
    manifest = json.loads((lease / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["exit_code"] == 1
    log = (lease / "run.log").read_text()
    assert "Given dtype(s) 'torch.float16'can't be supported by this op 'amin'" in log
    assert "2 failed, 3 passed" in log
    results = flaggems_record.parse((lease / "result_record.log").read_text(), source="result_record.log")
    cases = {r.case for r in results}
    assert len(cases) == 15 and {c.split("/")[0] for c in cases} == {"amin", "any", "maximum"}
    assert len(results) == 50   # the 50 series every later night judged


def _nights(lease: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((REC / lease / "json").glob("night*-*.json"))]


@pytest.mark.parametrize(("lease", "labels"), [("lease2", ["A", "A", "D1"]), ("lease3", ["A", "A", "D1"]),
                                               ("lease4", ["A", "A"])])
def test_no_loud_verdict_and_no_confirmed_alert_on_unchanged_code(lease: str, labels: list[str]) -> None:
    nights = _nights(lease)
    assert [n["label"] for n in nights] == labels
    state: dict[tuple[str, str], str] = {}
    for n in nights:
        assert n["series"] == 50 and n["rc"] == 0
        assert not LOUD & set(n["verdict_counts"]), (n["night"], n["verdict_counts"])
        assert not n["loud"]
        assert all(e["to_state"] in ("new", "cleared") and not e["announced"] for e in n["alert_events"])
        state.update({(e["case"], e["metric"]): e["to_state"] for e in n["alert_events"]})
        still_new = {key for key, to in state.items() if to == "new"}
        assert not still_new & {(u["case"], u["metric"]) for u in n["unmeasurable"]}, n["night"]


@pytest.mark.parametrize(("lease", "gap", "outcomes"), [
    ("lease2", 0.058, {"inconclusive": 13, "unmeasurable": 6}),
    ("lease3", 0.070, {"inconclusive": 12, "unmeasurable": 5, "cleared": 1}),
])
def test_each_ab_cost_what_it_was_estimated_to_and_decided_nothing_it_could_not(
        lease: str, gap: float, outcomes: dict) -> None:
    (night3,) = [n for n in _nights(lease) if n["night"] == 3]
    ab = night3["meta"]["ab"]["h200"]
    assert ab["runs"] == 14 and len(ab["observed"]) == 14
    miss = ab["seconds"] / ab["est_s"] - 1
    assert miss == pytest.approx(gap, abs=0.001) and abs(miss) < 0.30
    assert ab["seconds"] <= ab["budget_s"] == 300.0
    assert ab["outcomes"] == outcomes
    for row in night3["ab_rows"]:   # an undecided A/B never reads unchanged
        assert row["verdict"] != "unchanged" or "cleared" in row["note"], row["note"]


HARNESS = r'''
import os, shutil, sys
shutil.copy(os.environ["RECORD_SRC"], "result_" + "_".join(a.replace("/", "_") for a in sys.argv[1:]) + ".log")
sys.stdout.write(open(os.environ["RUN_LOG_SRC"]).read())   # what pytest printed on the H200
sys.exit(1)
'''


@pytest.mark.parametrize("accepted", [False, True])
def test_the_recorded_exit_1_night_replayed_through_the_runner(tmp_path: Path, accepted: bool) -> None:
    """The first lease's night replayed through the real run_shard and parser: the H200 process's record log and
    output, exit 1. Without partial_exit_codes the shard fails (what happened live); with [1] (the recipe) it is ok,
    marked partial, and the read shard holds all 50 series."""
    import sys

    from zlops.config.settings import SuiteConfig
    from zlops.model import ShardStatus
    from zlops.run.runner import ShardSpec, run_shard

    lease = REC / "lease1_exit1"
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    (worktree / "harness.py").write_text(HARNESS)
    suite = SuiteConfig.model_validate({
        "repo": str(tmp_path / "up"), "format": "flaggems-record", "pools": ["h200"],
        "command": ["python", "{worktree}/harness.py", "-m", "{cases}"],
        "select": {"token": "^([^/]+)/", "join": " or ", "every": "amin or any or maximum"},
        "results_glob": "result*.log", "results_name": "flaggems_record.log",
        "env": {"RECORD_SRC": str(lease / "result_record.log"), "RUN_LOG_SRC": str(lease / "run.log")},
        **({"partial_exit_codes": [1]} if accepted else {})})
    spec = ShardSpec(run_key="nightly:flaggems:n1-A", suite_name="flaggems", suite=suite, sha="d706fbe2" * 5,
                     pool="h200", backend="cpu", device=0, worktree=worktree, venv=Path(sys.prefix),
                     artifact_dir=tmp_path / "art", cases=None)
    out = run_shard(spec, locks_dir=tmp_path / "locks", device_wait_s=0, telemetry_interval_s=0.05)
    assert out.exit_code == 1
    if not accepted:
        assert out.status is ShardStatus.FAILED and "exited with code 1" in (out.error or "")
        return
    assert out.status is ShardStatus.OK and (out.error or "").startswith("partial: the benchmark exited with code 1")
    results = flaggems_record.parse(spec.results_file.read_text(), source=str(spec.results_file))
    assert len(results) == 50


@pytest.mark.parametrize("manifest", ["manifest_night1.json", "manifest_night3_ab_00A.json"])
def test_on_the_later_leases_every_process_exited_1_and_was_kept_as_partial(manifest: str) -> None:
    """Leases 2-4 ran the recipe's ``partial_exit_codes: [1]``: the nightly shard and the A/B runs exited 1 (the
    same two failing dtype tests) and were kept, marked partial (every night judged 50 series)."""
    data = json.loads((REC / "lease2" / manifest).read_text())
    assert data["status"] == "ok" and data["exit_code"] == 1 and data["partial_exit_codes"] == [1]
    assert data["error"].startswith("partial: the benchmark exited with code 1 (the suite's partial_exit_codes)")
