"""google-benchmark adapter, on real Google Benchmark 1.9.5 JSON (tests/data/google_benchmark/PROVENANCE.md).

Broken and edge-case inputs are derived in memory from the real files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from zlops.errors import ParseError
from zlops.formats import format_names, parse_results
from zlops.formats.google_benchmark import parse, parse_with_report

DATA = Path(__file__).resolve().parents[1] / "data" / "google_benchmark"


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _doc(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(_text(name))
    return doc


def _by_key(text: str) -> dict[tuple[str, str], Any]:
    return {(c.case, c.metric): c for c in parse(text, source="gb.json")}


def test_registered() -> None:
    assert "google-benchmark" in format_names()
    assert len(parse_results("google-benchmark", DATA / "repetitions3.json")) == 10


def test_repetitions_are_raw_samples_and_aggregates_are_ignored() -> None:
    got = _by_key(_text("repetitions3.json"))
    assert sorted({case for case, _ in got}) == ["sort_list", "sum_list/4096", "sum_list/64"]
    real = got[("sum_list/64", "real_time")]
    assert (real.unit, real.lower_is_better) == ("ns", True)
    assert real.samples == (284.28172262345043, 264.91769829627964, 267.08834880219064)  # not the mean 272.09...
    assert got[("sum_list/64", "cpu_time")].samples == (284.29219507747615, 264.9224804518754, 266.9446530831984)
    assert real.params == {"raw": True, "samples_from": "repetitions", "repetitions": 3, "threads": 1,
                           "iterations": [230329, 230329, 230329], "label": None, "counters": [],
                           "error_runs": 3, "skipped_runs": 0,
                           "context": {"library_version": "1.9.5", "json_schema_version": 1,
                                       "executable": "bench_small.py", "num_cpus": 2, "mhz_per_cpu": 2596,
                                       "library_build_type": "release"}}


def test_time_unit_and_throughput_counters() -> None:
    got = _by_key(_text("repetitions3.json"))
    sort = got[("sort_list", "real_time")]
    assert sort.unit == "ms" and sort.samples[2] == 0.06628467493989768
    assert sort.params["counters"] == ["elements"]  # a user counter: unknown unit, not a metric
    assert ("sort_list", "elements") not in got and ("sort_list", "bytes_per_second") not in got
    bw = got[("sum_list/4096", "bytes_per_second")]
    assert (bw.unit, bw.lower_is_better) == ("B/s", False)
    assert bw.samples == (2586871374.012165, 2680698705.425014, 2659218607.2361436)
    items = got[("sum_list/4096", "items_per_second")]
    assert (items.unit, items.lower_is_better, len(items.samples)) == ("items/s", False, 3)


def test_aggregates_only_falls_back_to_the_median() -> None:
    got = _by_key(_text("aggregates_only.json"))
    real = got[("sum_list/64", "real_time")]
    assert real.samples == (261.5268910362965,)
    assert (real.params["raw"], real.params["samples_from"]) == (False, "aggregate median")
    assert got[("sort_list", "cpu_time")].samples == (0.05829996153846159,)


def test_mean_is_used_when_no_median_was_reported() -> None:
    doc = _doc("aggregates_only.json")
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b.get("aggregate_name") != "median"]
    got = _by_key(json.dumps(doc))
    assert got[("sum_list/64", "real_time")].samples == (265.3435431950301,)
    assert got[("sum_list/64", "real_time")].params["samples_from"] == "aggregate mean"


def test_single_run_without_repetitions() -> None:
    got = _by_key(_text("single.json"))
    assert got[("sum_list/4096", "real_time")].samples == (12122.15041649294,)
    assert got[("sum_list/4096", "real_time")].params["raw"] is True


def test_error_runs_are_reported_not_sampled() -> None:
    text = _text("repetitions3.json")
    rep = parse_with_report(text, source="gb.json")
    assert not any(c.case == "always_fails" for c in rep.results)
    assert [(d.kind, d.item, d.reason) for d in rep.dropped] == [("error", "always_fails", "no device found")] * 3
    first = text.index('"name": "always_fails"')
    assert rep.dropped[0].line == text[:first].count("\n")  # the line of the entry's "{"


def test_skip_with_message_is_reported_as_skipped() -> None:
    doc = _doc("single.json")
    entry = next(b for b in doc["benchmarks"] if b["name"] == "sort_list")
    entry.update(error_message="needs 2 devices", real_time=0.0, cpu_time=0.0)
    rep = parse_with_report(json.dumps(doc), source="gb.json")
    assert [(d.kind, d.item) for d in rep.skipped] == [("skipped", "sort_list")]
    assert rep.results[0].params["skipped_runs"] == 1


def test_partially_failed_repetitions_keep_the_good_ones() -> None:
    doc = _doc("repetitions3.json")
    doc["benchmarks"][1].update(error_occurred=True, error_message="flaky")
    got = _by_key(json.dumps(doc))
    assert got[("sum_list/64", "real_time")].samples == (284.28172262345043, 267.08834880219064)


def test_only_errors_measured_nothing() -> None:
    doc = _doc("single.json")
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["name"] == "always_fails"]
    rep = parse_with_report(json.dumps(doc), source="gb.json")
    assert rep.measured_nothing and len(rep.dropped) == 1


def _err(text: str) -> ParseError:
    with pytest.raises(ParseError) as excinfo:
        parse(text, source="gb.json")
    assert excinfo.value.path == "gb.json"
    return excinfo.value


def test_truncated_file_is_an_error_with_a_line() -> None:
    text = _text("repetitions3.json")
    err = _err(text[: len(text) // 2])
    assert "invalid JSON" in str(err) and err.line is not None and err.line > 100


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["benchmarks"][0].update(time_unit="fortnights"), "benchmarks[0].time_unit"),
    (lambda d: d["benchmarks"][0].pop("real_time"), "benchmarks[0].real_time: missing required key"),
    (lambda d: d["benchmarks"][0].update(real_time="fast"), "benchmarks[0].real_time: expected a finite number"),
    (lambda d: d["benchmarks"][1].update(time_unit="us"), "benchmark 'sum_list/64' mixes time units"),
    (lambda d: d.pop("benchmarks"), "expected a Google Benchmark JSON object"),
])
def test_garbled_documents_are_errors(edit, message: str) -> None:
    doc = _doc("repetitions3.json")
    edit(doc)
    assert message in str(_err(json.dumps(doc, indent=2)))


def test_non_finite_time_is_an_error() -> None:
    text = re.sub(r'"real_time": [^,]+', '"real_time": NaN', _text("single.json"), count=1)
    assert "benchmarks[0].real_time: expected a finite number" in str(_err(text))


def test_pytest_benchmark_json_is_refused() -> None:
    other = (Path(__file__).resolve().parents[1] / "data" / "pytest_benchmark" / "with_data.json").read_text()
    assert "missing required key" in str(_err(other))
