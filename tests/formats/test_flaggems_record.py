"""flaggems-record adapter, on real FlagGems `--record log` files (tests/data/flaggems/PROVENANCE.md).

No real file holds query-mode lines, a dict shape_detail or an error_msg row: those tests add
SYNTHETIC lines, written after FlagGems' writer (attri_util.BenchmarkResult.to_json, the query-mode
`attri.to_dict()` Python repr, and the multi-line json.dumps(indent=2) dump), to copies of the real
files in memory, and say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zlops.errors import ParseError
from zlops.formats import format_names, parse_results
from zlops.formats.flaggems_record import parse, parse_with_report, shape_key

DATA = Path(__file__).resolve().parents[1] / "data" / "flaggems"
ABS = "result-m_abs-sv--level_core--record_log.log"
HEADER_ONLY = "result-m_topk_softmax-sv--level_core--record_log.log"
MULTI = "result-multi-op_lift_fresh_copy-margin_ranking_loss-soft_margin_loss--warmup_1--iter_1.log"
OLD = "result_test_reduction_perf--level_core--record_log-k_test_slice_scatter_perf.log"


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _cases(text: str) -> dict[tuple[str, str], object]:
    return {(c.case, c.metric): c for c in parse(text, source="r.log")}


def _record(op: str, rows: list[dict[str, object]], dtype: str = "torch.float32") -> str:
    """A synthetic record line, shaped like BenchmarkResult.to_json() (current schema)."""
    full = [{"legacy_shape": None, "shape_detail": [[8, 8]], "latency_base": 0.01, "latency": 0.02, "gbps_base": None,
             "gbps": None, "speedup": 0.5, "accuracy": None, "tflops": None, "utilization": None,
             "compared_speedup": None, "error_msg": None} | r for r in rows]
    return "[INFO] " + json.dumps({"op_name": op, "dtype": dtype, "mode": "kernel", "level": "core", "result": full})


def test_registered_and_reads_a_file() -> None:
    assert "flaggems-record" in format_names()
    assert len(parse_results("flaggems-record", DATA / ABS)) == 36  # 3 dtypes x 3 shapes x 4 metrics


def test_current_schema_metrics_units_and_directions() -> None:
    got = _cases(_text(ABS))
    key = "abs/float16/(64x64)"
    assert {m: (c.unit, c.lower_is_better, c.samples) for (k, m), c in got.items() if k == key} == {
        "latency": ("ms", True, (0.0070940000005066395,)),
        "latency_base": ("ms", True, (0.005140999797731638,)),
        "speedup": ("x", False, (0.7246968984161937,)),
        "tflops": ("TFLOPS", False, (0.0005773893430656149,)),
    }
    assert ("abs/float16/(64x64)", "gbps") not in got  # null in the file: no metric
    assert got[("abs/bfloat16/(64x512x512)", "latency")].samples == (0.06354600191116333,)
    assert got[(key, "latency")].params == {
        "op": "abs", "dtype": "torch.float16", "shape_detail": [[64, 64]], "legacy_shape": None,
        "mode": "kernel", "level": "core", "repeats": 1, "records": 3, "error_rows": 0, "query_lines_skipped": 0}


def test_header_only_file_has_no_results() -> None:
    rep = parse_with_report(_text(HEADER_ONLY), source=HEADER_ONLY)
    assert rep.results == () and rep.measured_nothing and rep.dropped == ()
    assert parse_results("flaggems-record", DATA / HEADER_ONLY) == []


def test_mixed_shape_detail_and_header_line() -> None:
    got = _cases(_text(MULTI))
    assert len(got) == 81  # 9 records x 3 shapes x 3 metrics (tflops is null throughout)
    case = "margin_ranking_loss/bfloat16/(1024x256, 1024x256, 1024x256, 0.5, 1)"
    assert got[(case, "speedup")].samples == (1.9901409338656848,)
    assert got[(case, "latency")].params["shape_detail"] == [[1024, 256], [1024, 256], [1024, 256], 0.5, 1]
    assert ("soft_margin_loss/float32/(2x3, 2x3, 1)", "latency_base") in got


def test_2024_schema_without_gbps_and_error_msg() -> None:
    got = _cases(_text(OLD))
    assert len(got) == 45  # 3 records x 5 shapes x latency/latency_base/speedup
    case = "slice_scatter/float16/(1024x65536, 504x65536, 0, 16, 1024, 2)"
    assert got[(case, "latency")].samples == (0.2149440050125122,)
    assert got[(case, "latency")].params["mode"] == "cuda"
    assert got[(case, "latency")].params["legacy_shape"] == 65536


def test_query_mode_lines_are_skipped_and_counted() -> None:
    # synthetic query-mode output: the attri.to_dict() Python repr and a multi-line json.dumps(indent=2)
    query = ("[INFO] {'op_name': 'abs', 'recommended_core_shapes': [(64, 64), (4096, 4096)], 'shape_desc': 'M, N'}\n"
             "[INFO] [\n  {\n    \"op_name\": \"abs\",\n    \"shape_desc\": \"M, N\"\n  }\n]\n")
    rep = parse_with_report(query + _text(ABS), source="r.log")
    assert len(rep.results) == 36
    assert [(d.kind, d.line) for d in rep.dropped] == [("query_line", 1), ("query_line", 2)]
    assert rep.results[0].params["query_lines_skipped"] == 2


def test_dict_shape_detail_gets_a_stable_key() -> None:
    detail = {"start": 0, "end": 227, "steps": 1671, "dtype": "torch.float32", "device": "cuda"}
    line = _record("linspace", [{"shape_detail": detail}])  # synthetic
    case = 'linspace/float32/(device="cuda", dtype="torch.float32", end=227, start=0, steps=1671)'
    assert {c.case for c in parse(line, source="r.log")} == {case}
    reordered = _record("linspace", [{"shape_detail": dict(reversed(list(detail.items())))}])
    assert {c.case for c in parse(reordered, source="r.log")} == {case}


@pytest.mark.parametrize(("detail", "key"), [
    ([[64, 64]], "64x64"),
    ([[2, 3], [2, 3], 0.5, 1], "2x3, 2x3, 0.5, 1"),
    ([[], [4]], "(), 4"),
    ([True, None, "x", [1.5, 2]], 'true, null, "x", [1.5,2]'),
    ({"b": [1, 2], "a": 1}, "a=1, b=[1,2]"),
    (None, "null"),
    (7, "7"),
])
def test_shape_key(detail: object, key: str) -> None:
    assert shape_key(detail) == key


def test_error_rows_are_reported_not_sampled() -> None:
    line = _record("mm", [{"shape_detail": [[8, 8]]},
                          {"shape_detail": [[16, 16]], "latency": None, "speedup": None, "latency_base": None,
                           "error_msg": "CUDA error: out of memory"}])  # synthetic
    rep = parse_with_report(_text(ABS) + line + "\n", source="r.log")
    assert [(d.kind, d.item, d.reason, d.line) for d in rep.dropped] == [
        ("error_row", "mm/float32/(16x16)", "CUDA error: out of memory", 4)]
    assert {c.case for c in rep.results if c.case.startswith("mm/")} == {"mm/float32/(8x8)"}
    assert all(c.params["error_rows"] == 1 for c in rep.results)


def test_the_same_case_twice_gives_two_samples() -> None:
    text = _record("add", [{"latency": 0.02}]) + "\n" + _record("add", [{"latency": 0.03}]) + "\n"
    got = _cases(text)
    assert got[("add/float32/(8x8)", "latency")].samples == (0.02, 0.03)
    assert got[("add/float32/(8x8)", "latency")].params["repeats"] == 2


def test_nonfinite_values_are_dropped_and_reported() -> None:
    line = _record("div", [{"speedup": float("inf")}])
    rep = parse_with_report(line, source="r.log")
    assert [m.metric for m in rep.results] == ["latency", "latency_base"]
    assert [(d.kind, d.item) for d in rep.dropped] == [("nonfinite", "div/float32/(8x8) speedup")]


@pytest.mark.parametrize(("text", "line", "message"), [
    (_text(ABS)[:-200], 3, "record is not valid JSON"),
    (_text(ABS).replace('"op_name": "abs", ', "", 1), 1, "record: op_name: missing required key"),
    (_text(ABS).replace('"latency": 0.0070940000005066395', '"latency": "fast"', 1), 1,
     "result[0].latency: expected a number"),
    (_text(ABS).replace('"result": [{', '"result": [7, {', 1), 1, "record: result[0]: expected an object"),
    (_text(ABS).replace('"shape_detail": [[64, 64]], ', "", 1), 1, "result[0]: missing shape_detail"),
    ((DATA / "benchmark_v22_results.json").read_text(encoding="utf-8"), 1, "expected '[LEVEL] message' log lines"),
    ("[INFO] Benchmark record logger enabled\nabs 0.1 0.2\n", 2, "is this a FlagGems --record log file?"),
])
def test_truncated_garbled_and_wrong_files_are_errors_with_a_line(text: str, line: int, message: str) -> None:
    with pytest.raises(ParseError) as excinfo:
        parse(text, source="r.log")
    assert message in str(excinfo.value)
    assert (excinfo.value.path, excinfo.value.line) == ("r.log", line)


def test_one_case_in_two_modes_is_an_error() -> None:
    text = _record("add", [{}]) + "\n" + _record("add", [{}]).replace('"mode": "kernel"', '"mode": "operator"') + "\n"
    with pytest.raises(ParseError) as excinfo:
        parse(text, source="r.log")
    assert "recorded in mode kernel/core and again in operator/core" in str(excinfo.value)
    assert excinfo.value.line == 2


def test_the_runner_s_timer_probe_reads_the_file_as_ingest_does(tmp_path: Path) -> None:
    """results_timer (the runner reads a record file's ``mode`` for the shard's identity) takes the
    file as parse_results does: a real record in the shard folder gives its timer; a FIFO, or a link
    out of the folder, gives None at once (it used to wait on the FIFO for ever, or follow the link)."""
    import os
    import threading

    from zlops.formats import results_timer

    shard = tmp_path / "shard"
    shard.mkdir()
    good = shard / "results.log"
    good.write_text(_text(ABS), encoding="utf-8")
    assert results_timer("flaggems-record", good, root=shard) == "triton.do_bench"
    outside = tmp_path / "elsewhere.log"
    outside.write_text(_text(ABS), encoding="utf-8")
    link = shard / "linked.log"
    link.symlink_to(outside)
    assert results_timer("flaggems-record", link, root=shard) is None
    fifo = shard / "fifo.log"
    os.mkfifo(fifo)
    got: list[object] = []
    probe = threading.Thread(target=lambda: got.append(results_timer("flaggems-record", fifo, root=shard)),
                             daemon=True)
    probe.start()
    probe.join(5)
    assert not probe.is_alive() and got == [None]
