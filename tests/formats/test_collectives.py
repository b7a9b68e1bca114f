"""collectives adapter (pypto-tooling run_sweep.py results).

SYNTHETIC INPUT: no real results.json or per-round timing.json exists publicly (upstream's
results/ is gitignored). The inputs are built here from the schema in
georgebisbas/pypto-tooling profiling/collectives/run_sweep.py @ 1f9c55b5 (_build_sample,
_aggregate_execute_stats, _cmd_pair_impl's row dict, including its wall_s_stdev = execute stdev
bug) around the REAL EquivalenceCase input tests/data/pypto-tooling/
equivalence_case_mesh_p2_count65536_fp32_a2a3_d0-1.json (its case_id, n_bytes and round counts).
The timing values themselves are invented.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from zlops.errors import ParseError
from zlops.formats import format_names, parse_text
from zlops.formats.collectives import parse, parse_with_report

CASE = json.loads((Path(__file__).resolve().parents[1] / "data" / "pypto-tooling" /
                   "equivalence_case_mesh_p2_count65536_fp32_a2a3_d0-1.json").read_text(encoding="utf-8"))
CASE_ID = "mesh_p2_count65536_fp32_a2a3_d0-1"  # EquivalenceCase.case_id for CASE
EXECUTE = [0.000412, 0.000398, 0.000405, 0.000431, 0.000401]


def _sample(i: int, phase: str, execute_s: float, *, setup_s: float | None = None, ok: bool = True,
            device_wall_s: float | None = None) -> dict[str, Any]:
    """One per-round sample, as _build_sample writes it."""
    s: dict[str, Any] = {"round": i, "phase": phase, "wall_s": round(execute_s * 1.5, 6),
                         "execute_s": round(execute_s, 6), "ok": ok,
                         "bw_execute_mb_s": round(CASE["n_bytes"] / execute_s / 1e6, 6) if execute_s > 0 else 0.0}
    if setup_s is not None:
        s["setup_s"] = setup_s
    s["phases"] = {"execute": round(execute_s, 6)}
    if device_wall_s is not None:
        s["device_wall_s"] = device_wall_s
    return s


def _samples() -> list[dict[str, Any]]:
    out = [_sample(0, "warmup-1", 0.0021, setup_s=3.25), _sample(1, "warmup-2", 0.00052),
           _sample(2, "warmup-3", 0.00047)]
    out += [_sample(3 + k, f"timed-{k + 1}", v, device_wall_s=round(v * 0.8, 6)) for k, v in enumerate(EXECUTE)]
    return out


def _run(stack: str, samples: list[dict[str, Any]], correctness: str = "pass") -> dict[str, Any]:
    """One results.json run row, with run_sweep's aggregation formulas."""
    timed = [s for s in samples if s["phase"].startswith("timed")]
    ex = [s["execute_s"] for s in timed]
    dw = [s["device_wall_s"] for s in timed if "device_wall_s" in s]
    stdev = statistics.stdev(ex)
    return {"case_id": CASE_ID, "stack": stack, "equivalence_hash": "0123456789abcdef", "variant": "mesh", "p": 2,
            "count": 65536, "dtype": "fp32", "platform": "a2a3", "correctness": correctness,
            "execute_s_mean": round(statistics.mean(ex), 6), "execute_s_stdev": round(stdev, 6),
            "execute_s_median": round(statistics.median(ex), 6),
            "device_wall_s_mean": round(statistics.mean(dw), 6) if dw else None,
            "device_wall_s_median": round(statistics.median(dw), 6) if dw else None,
            "setup_s": 3.25 if stack != "simpler" else None,
            "bw_execute_mb_s": round(statistics.mean(s["bw_execute_mb_s"] for s in timed), 6),
            "wall_s_mean": round(statistics.mean(s["wall_s"] for s in timed), 6),
            "wall_s_stdev": round(stdev, 6),  # upstream's bug: the execute stdev
            "phase_means": {"execute": round(statistics.mean(ex), 6)}, "compile_profile_means": {},
            "n_warmup": CASE["warmup_rounds"], "n_timed": len(timed),
            "artifact_bundle": f"results/campaigns/demo/run_001/cases/{CASE_ID}/{stack}"}


def _results(*runs: dict[str, Any]) -> str:
    return json.dumps({"campaign": "demo", "timestamp": "2026-08-11T09:12:44.120315+00:00", "case": CASE,
                       "runs": list(runs)}, indent=2) + "\n"


def _err(text: str, source: str = "results.json") -> ParseError:
    with pytest.raises(ParseError) as excinfo:
        parse(text, source=source)
    assert excinfo.value.path == source
    return excinfo.value


def test_registered() -> None:
    assert "collectives" in format_names()
    assert len(parse_text("collectives", _results(_run("hccl", _samples())))) == 5


def test_results_json_gives_summary_statistics_marked_not_raw() -> None:
    got = {(c.case, c.metric): c for c in parse(_results(_run("hccl", _samples())), source="results.json")}
    case = f"{CASE_ID}/hccl"
    assert {m: (c.unit, c.lower_is_better, c.samples) for (_, m), c in got.items()} == {
        "execute_s": ("s", True, (0.000405,)),
        "device_wall_s": ("s", True, (0.000324,)),
        "wall_s": ("s", True, (0.000614,)),  # mean of the timed wall_s (no median is written)
        "bw_execute": ("MB/s", False, (round(statistics.mean(65536 * 4 / v / 1e6 for v in EXECUTE), 6),)),
        "setup_s": ("s", True, (3.25,)),
    }
    execute = got[(case, "execute_s")]
    assert execute.params["raw"] is False and execute.params["samples_from"] == "execute_s_median"
    assert execute.params["stats"] == {"mean": 0.000409, "median": 0.000405, "stdev": 1.3e-05}
    expected = {"campaign": "demo", "stack": "hccl", "case_id": CASE_ID, "n_timed": 5, "n_warmup": 3, "p": 2,
                "count": 65536, "n_bytes": 262144, "variant": "mesh", "failed_runs": 0}
    assert {k: execute.params[k] for k in expected} == expected
    assert "wall_s_stdev is the execute stdev" in got[(case, "wall_s")].params["note"]


def test_failed_run_is_reported_and_counted() -> None:
    text = _results(_run("hccl", _samples()), _run("simpler", _samples(), correctness="fail"))
    rep = parse_with_report(text, source="results.json")
    assert {c.case for c in rep.results} == {f"{CASE_ID}/hccl"}
    assert [(d.kind, d.item) for d in rep.failed] == [("failed", f"{CASE_ID}/simpler")]
    assert all(c.params["failed_runs"] == 1 for c in rep.results)


def test_run_without_setup_or_device_wall_omits_those_metrics() -> None:
    samples = [{k: v for k, v in s.items() if k != "device_wall_s"} for s in _samples()]
    cases = parse(_results(_run("simpler", samples)), source="results.json")
    assert [c.metric for c in cases] == ["execute_s", "wall_s", "bw_execute"]


def test_empty_runs_measured_nothing() -> None:
    assert parse(_results(), source="results.json") == []


def test_per_round_list_gives_raw_timed_samples_named_from_the_bundle_path() -> None:
    samples = _samples()
    source = f"results/campaigns/demo/run_001/cases/{CASE_ID}/pypto-host/timing.json"
    got = {c.metric: c for c in parse(json.dumps(samples, indent=2), source=source)}
    assert {c.case for c in got.values()} == {f"{CASE_ID}/pypto-host"}
    assert got["execute_s"].samples == tuple(EXECUTE)
    assert got["wall_s"].samples == tuple(round(v * 1.5, 6) for v in EXECUTE)
    assert got["device_wall_s"].samples == tuple(round(v * 0.8, 6) for v in EXECUTE)
    assert got["bw_execute"].samples[0] == round(262144 / 0.000412 / 1e6, 6)
    assert got["setup_s"].samples == (3.25,)
    assert got["execute_s"].params == {"raw": True, "n_warmup": 3, "n_timed": 5, "failed_rounds": 0,
                                       "samples_from": "timed rounds"}


def test_per_round_list_drops_failed_rounds_and_names_by_stem_elsewhere() -> None:
    samples = _samples()
    samples[4]["ok"] = False
    rep = parse_with_report(json.dumps(samples), source="/tmp/run.log")
    execute = {c.metric: c for c in rep.results}["execute_s"]
    assert execute.case == "run" and execute.samples == (0.000412, 0.000405, 0.000431, 0.000401)
    assert [(d.kind, d.reason) for d in rep.dropped] == [("failed_round", "round 4 (timed-2) is not ok")]
    assert execute.params["failed_rounds"] == 1


def test_per_round_list_without_timed_rounds_measured_nothing() -> None:
    assert parse(json.dumps(_samples()[:3]), source="timing.json") == []


@pytest.mark.parametrize(("edit", "at", "message"), [
    (lambda t: t[: len(t) // 2], None, "invalid JSON"),
    (lambda t: t.replace('"execute_s_median": 0.000405', '"execute_s_median": "fast"'), '"fast"',
     "runs[0].execute_s_median: expected a finite number"),
    (lambda t: t.replace('"correctness": "pass"', '"correctness": "maybe"'), '"maybe"', "runs[0].correctness"),
    (lambda t: t.replace('"campaign": "demo",\n', ""), "{", "campaign: missing required key"),
    (lambda t: t.replace('"runs": [', '"rounds": ['), "{", "expected a collectives results.json object"),
    (lambda t: "[1, 2]", "[", "[0]: expected an object"),
    (lambda t: '"results"', '"', "expected a collectives results.json object"),
])
def test_truncated_garbled_and_wrong_files_are_errors(edit, at: str | None, message: str) -> None:
    text = edit(_results(_run("hccl", _samples())))
    err = _err(text)
    assert message in str(err)
    if at is not None:  # the line of the offending value
        assert err.line == text[:text.index(at)].count("\n") + 1


def test_a_flaggems_log_is_refused() -> None:
    assert "invalid JSON" in str(_err('[INFO] {"op_name": "abs"}\n', source="result.log"))
