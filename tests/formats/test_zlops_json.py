from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from zlops.errors import ParseError
from zlops.formats import format_names, parse_results, parse_text, zlops_json
from zlops.formats.zlops_json import dumps, parse, parse_document, upgrade
from zlops.model import CaseResult

DOCS = Path(__file__).resolve().parents[2] / "docs" / "formats.md"

# Line numbers matter in these tests: keep one key per line where a test points at it.
DOC = """\
{
  "schema_version": 1,
  "harness": {"name": "demo-bench", "version": "1", "commit": "abc"},
  "context": {"device": "0", "rounds": 3},
  "cases": [
    {"name": "softmax", "metric": "time", "unit": "ms", "lower_is_better": true,
     "samples": [1.21, 1.19, 1.20],
     "params": {"n": 4096}},
    {"name": "gemm", "metric": "time", "unit": "µs",
     "samples": [10, 11, 12]},
    {"name": "gemm", "metric": "bandwidth", "unit": "GB/s",
     "samples": [800.5]}
  ]
}
"""


def _err(text: str) -> ParseError:
    with pytest.raises(ParseError) as excinfo:
        parse(text, source="r.json")
    return excinfo.value


def _doc(**changes: Any) -> str:
    doc: dict[str, Any] = {"schema_version": 1, "cases": [
        {"name": "a", "metric": "time", "unit": "ms", "samples": [1.0, 2.0]}]}
    doc.update(changes)
    return json.dumps(doc, indent=2)


def _case_doc(**case: Any) -> str:
    base = {"name": "a", "metric": "time", "unit": "ms", "samples": [1.0, 2.0]}
    base.update(case)
    return json.dumps({"schema_version": 1, "cases": [base]}, indent=2)


def test_registered() -> None:
    assert "zlops-json" in format_names()
    assert parse_text("zlops-json", DOC) == parse(DOC, source="x")


def test_parses_cases_in_order_with_registry_semantics() -> None:
    cases = parse(DOC, source="r.json")
    assert [(c.case, c.metric, c.unit, c.lower_is_better) for c in cases] == [
        ("softmax", "time", "ms", True),
        ("gemm", "time", "us", True),            # alias µs stored as the canonical symbol
        ("gemm", "bandwidth", "GB/s", False),    # direction from the registry, not declared
    ]
    assert cases[0].samples == (1.21, 1.19, 1.20)
    assert cases[0].params == {"n": 4096}
    assert cases[1].samples == (10.0, 11.0, 12.0)
    assert all(isinstance(v, float) for v in cases[1].samples)
    assert cases[2].params == {}
    assert cases[0].median == pytest.approx(1.20)


def test_parse_document_keeps_harness_and_context() -> None:
    doc = parse_document(DOC, source="r.json")
    assert doc.schema_version == 1
    assert doc.harness == {"name": "demo-bench", "version": "1", "commit": "abc"}
    assert doc.context == {"device": "0", "rounds": 3}
    assert len(doc.cases) == 3


def test_docs_example_parses() -> None:
    block = re.search(r"## zlops-json.*?```json\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)
    assert block is not None
    cases = parse(block.group(1), source="docs/formats.md")
    assert [(c.case, c.metric, c.unit, c.lower_is_better, len(c.samples)) for c in cases] == [
        ("softmax", "time", "ms", True, 3),
        ("softmax", "bandwidth", "GB/s", False, 3),
        ("gemm", "speedup", "x", False, 3),
    ]


def test_empty_cases_and_optional_sections() -> None:
    assert parse('{"schema_version": 1, "cases": []}', source="r.json") == []
    doc = parse_document('{"schema_version": 1, "cases": []}', source="r.json")
    assert doc.harness is None and doc.context == {}


def test_parse_results_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(DOC, encoding="utf-8")
    assert len(parse_results("zlops-json", path)) == 3
    path.write_text(DOC.replace('"samples": [800.5]', '"samples": []'), encoding="utf-8")
    with pytest.raises(ParseError) as excinfo:
        parse_results("zlops-json", path)
    assert excinfo.value.path == str(path)
    assert excinfo.value.line == 12
    assert str(excinfo.value).startswith(f"{path}:12: cases[2].samples: ")


def test_syntax_error_carries_its_line() -> None:
    err = _err(DOC.replace('"samples": [10, 11, 12]}', '"samples": [10, 11, 12]'))
    assert err.line == 11
    assert err.path == "r.json"
    assert "invalid JSON" in str(err)
    assert str(err).startswith("r.json:11: ")


def test_truncated_file() -> None:
    text = DOC[: DOC.index('"samples": [800.5]')]
    err = _err(text)
    assert "invalid JSON" in str(err)
    assert err.line == 12


def test_empty_and_non_object_documents() -> None:
    assert "empty results file" in str(_err("  \n"))
    err = _err("[1, 2]")
    assert "expected a JSON object at the top level, got a list" in str(err)
    assert err.line == 1


def test_missing_and_unsupported_schema_versions() -> None:
    err = _err('{"cases": []}')
    assert "missing schema_version" in str(err) and "reads 1" in str(err)
    err = _err(DOC.replace('"schema_version": 1', '"schema_version": 2'))
    assert "schema_version 2 is newer than this zlops reads (reads 1)" in str(err)
    assert err.line == 2
    assert "not a zlops-json version" in str(_err(_doc(schema_version=0)))
    assert "schema_version: expected an integer, got \"1\"" in str(_err(_doc(schema_version="1")))
    assert "expected an integer, got true" in str(_err(_doc(schema_version=True)))


def test_upgrade_hook_runs_registered_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    def zero_to_one(doc: dict[str, Any]) -> dict[str, Any]:
        return {"schema_version": 1, "cases": [
            {"name": c["case"], "metric": "time", "unit": "s", "samples": c["values"]} for c in doc["results"]]}

    monkeypatch.setattr(zlops_json, "_UPGRADES", {0: zero_to_one})
    monkeypatch.setattr(zlops_json, "READABLE_VERSIONS", (0, 1))
    old = {"schema_version": 0, "results": [{"case": "k", "values": [3, 4]}]}
    assert upgrade(old)["cases"][0]["name"] == "k"
    (case,) = parse(json.dumps(old), source="old.json")
    assert (case.case, case.unit, case.samples) == ("k", "s", (3.0, 4.0))


def test_upgrade_is_identity_for_the_current_version() -> None:
    doc = {"schema_version": 1, "cases": []}
    assert upgrade(doc) == doc


def test_unknown_top_level_key_is_rejected_but_harness_and_context_are_open() -> None:
    err = _err(DOC.replace('"context"', '"contxt"'))
    assert "contxt: unknown key 'contxt' (allowed: schema_version, harness, context, cases)" in str(err)
    assert err.line == 4
    doc = parse_document(_doc(harness={"name": "h", "anything": [1]}, context={"x": {"y": None}}),
                         source="r.json")
    assert doc.harness == {"name": "h", "version": None, "anything": [1]}
    assert doc.context == {"x": {"y": None}}


def test_harness_needs_a_name() -> None:
    assert "harness.name: missing required key" in str(_err(_doc(harness={"version": "2"})))


def test_unknown_key_in_a_case_names_index_and_key() -> None:
    err = _err(DOC.replace('"params": {"n": 4096}', '"parms": {"n": 4096}'))
    assert "cases[0].parms: unknown key 'parms'" in str(err)
    assert err.line == 8
    # a misspelt required key is reported as the misspelling, not as the missing key
    err = _err(DOC.replace('"samples": [10, 11, 12]', '"sampels": [10, 11, 12]'))
    assert "cases[1].sampels: unknown key 'sampels'" in str(err)
    assert "(and 1 more problem)" in str(err)
    assert err.line == 10


@pytest.mark.parametrize(("bad", "shown"), [('"fast"', '"fast"'), ("NaN", "NaN"), ("Infinity", "Infinity"),
                                            ("-Infinity", "-Infinity"), ("true", "true"), ("null", "null")])
def test_non_finite_or_non_numeric_sample(bad: str, shown: str) -> None:
    err = _err(DOC.replace("[10, 11, 12]", f"[10, {bad}, 12]"))
    assert f"cases[1].samples[1]: expected a finite number, got {shown}" in str(err)
    assert err.line == 10


def test_samples_must_be_a_non_empty_list() -> None:
    err = _err(DOC.replace('"samples": [800.5]', '"samples": []'))
    assert "cases[2].samples: " in str(err) and "at least 1" in str(err)
    assert err.line == 12
    err = _err(DOC.replace('"samples": [800.5]', '"samples": 800.5'))
    assert "cases[2].samples: expected a list, got 800.5" in str(err)
    err = _err(DOC.replace('"samples": [800.5]', '"samples": [[800.5]]'))
    assert "cases[2].samples[0]: expected a finite number, got a list" in str(err)


def test_missing_case_key_points_at_the_case() -> None:
    err = _err(DOC.replace('"unit": "GB/s",', ""))
    assert "cases[2].unit: missing required key" in str(err)
    assert err.line == 11


@pytest.mark.parametrize(("case", "expected"), [
    ({"name": "  "}, "cases[0].name: expected a non-blank string"),
    ({"name": 3}, "cases[0].name: expected a string, got 3"),
    ({"metric": ""}, "cases[0].metric: expected a non-blank string"),
    ({"lower_is_better": "yes"}, 'cases[0].lower_is_better: expected true or false, got "yes"'),
    ({"params": [1]}, "cases[0].params: expected an object, got a list"),
    ({"unit": "furlongs"}, "cases[0].unit: unknown unit 'furlongs'; known units: s, ms"),
    ({"lower_is_better": False}, "cases[0].lower_is_better: lower_is_better=false contradicts unit 'ms'"),
    ({"unit": "count"}, "cases[0].lower_is_better: unit 'count'"),
    ({"params": {"alpha": float("nan")}}, "cases[0].params.alpha: expected a finite number, got NaN"),
])
def test_case_errors(case: dict[str, Any], expected: str) -> None:
    assert expected in str(_err(_case_doc(**case)))


def test_cases_must_be_objects() -> None:
    text = json.dumps({"schema_version": 1, "cases": [[1.0]]})
    assert "cases[0]: expected an object, got a list" in str(_err(text))


def test_context_must_be_finite() -> None:
    err = _err(_doc(context={"clock": [1, float("inf")]}))
    assert "context.clock[1]: expected a finite number, got Infinity" in str(err)


def test_directionless_unit_with_a_declaration() -> None:
    (case,) = parse(_case_doc(unit="count", lower_is_better=False, samples=[3]), source="r.json")
    assert case.lower_is_better is False and case.unit == "count"


def test_duplicate_case_points_at_the_repeat() -> None:
    err = _err(DOC.replace('"metric": "bandwidth"', '"metric": "time"'))
    assert "cases[2]: duplicate case (name 'gemm', metric 'time'); first defined at cases[1]" in str(err)
    assert err.line == 11


def test_dumps_round_trips() -> None:
    cases = [CaseResult("a[1]", "time", "us", True, (1.0, 2.5), {"n": 1}),
             CaseResult("count", "allocs", "count", False, (3.0,))]
    text = dumps(cases, harness={"name": "h"}, context={"device": "0"})
    doc = parse_document(text, source="dumped.json")
    assert list(doc.cases) == cases
    assert doc.context == {"device": "0"}
    assert doc.harness == {"name": "h", "version": None}
