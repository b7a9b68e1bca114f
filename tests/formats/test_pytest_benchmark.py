"""pytest-benchmark adapter, on real recorded output (tests/data/pytest_benchmark/PROVENANCE.md).

Broken inputs are derived from the real files here, never committed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zlops.errors import ParseError
from zlops.formats import format_names, parse_results
from zlops.formats.pytest_benchmark import parse

DATA = Path(__file__).resolve().parents[1] / "data" / "pytest_benchmark"

NAMES = [
    "test_ops_bench.py::test_sort[256]",            # shares the name test_sort[256] ...
    "test_sort[4096]",
    "test_matmul",
    "test_ops_bench.py::TestNumpy::test_sort[256]",  # ... with this one, so both use fullname
]


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _err(text: str) -> ParseError:
    with pytest.raises(ParseError) as excinfo:
        parse(text, source="bench.json")
    return excinfo.value


def test_registered() -> None:
    assert "pytest-benchmark" in format_names()
    assert len(parse_results("pytest-benchmark", DATA / "with_data.json")) == 4


def test_with_data_uses_raw_rounds() -> None:
    cases = parse(_text("with_data.json"), source="with_data.json")
    assert [c.case for c in cases] == NAMES
    assert all((c.metric, c.unit, c.lower_is_better) == ("time", "s", True) for c in cases)
    assert [len(c.samples) for c in cases] == [5, 5, 5, 5]
    sort4096 = cases[1]
    assert sort4096.samples == (0.0002653989999998885, 0.0002404028000000835, 0.00023453399999766588,
                                0.00023195820000410095, 0.0002288886000030743)
    assert sort4096.median == 0.00023453399999766588   # equals the file's stats.median
    assert sort4096.params["raw"] is True
    assert sort4096.params["param"] == "4096"
    assert sort4096.params["params"] == {"n": 4096}
    assert sort4096.params["group"] is None
    assert sort4096.params["fullname"] == "test_ops_bench.py::test_sort[4096]"
    assert sort4096.params["stats"] == {
        "min": 0.0002288886000030743, "max": 0.0002653989999998885, "mean": 0.00024023652000096263,
        "median": 0.00023453399999766588, "stddev": 1.4688453402003937e-05,
        "iqr": 1.5461049996190435e-05, "rounds": 5, "iterations": 10, "ops": 4162.564459375256,
    }
    matmul = cases[2]
    assert matmul.params["group"] == "numpy"
    assert matmul.params["extra_info"] == {"shape": [64, 64], "dtype": "float64"}
    assert matmul.samples[0] == 2.1407899998848735e-05   # the cold first round is kept as measured


def test_stats_only_falls_back_to_the_median() -> None:
    cases = parse(_text("stats_only.json"), source="stats_only.json")
    assert [c.case for c in cases] == NAMES
    assert [c.samples for c in cases] == [(3.928900002847513e-06,), (0.00023336819999713042,),
                                          (1.0276300002942662e-05,), (8.622999985163915e-07,)]
    assert all(c.params["raw"] is False for c in cases)
    stats = cases[2].params["stats"]
    assert (stats["min"], stats["max"], stats["rounds"], stats["iterations"]) == (
        1.023730000042633e-05, 2.2709900002837456e-05, 5, 10)


@pytest.mark.parametrize(("name", "first_sample"), [("v3_4_1.json", 5.680399999619112e-06),
                                                    ("v4_0_0.json", 5.834700004925253e-06)])
def test_older_pytest_benchmark_versions(name: str, first_sample: float) -> None:
    assert json.loads(_text(name))["version"] in ("3.4.1", "4.0.0")
    cases = parse(_text(name), source=name)
    assert [c.case for c in cases] == NAMES
    assert [len(c.samples) for c in cases] == [5, 5, 5, 5]
    assert cases[0].samples[0] == first_sample


def test_files_from_before_3_1_lack_ops() -> None:
    doc = json.loads(_text("v3_4_1.json"))
    for bench in doc["benchmarks"]:
        del bench["stats"]["ops"]
    cases = parse(json.dumps(doc), source="old.json")
    assert len(cases) == 4
    assert "ops" not in cases[1].params["stats"]
    assert cases[1].params["stats"]["median"] == 0.00023482550000153424


def test_unique_names_stay_short() -> None:
    doc = json.loads(_text("with_data.json"))
    doc["benchmarks"] = doc["benchmarks"][:3]     # drop the class benchmark that shared the name
    assert [c.case for c in parse(json.dumps(doc), source="x")] == [
        "test_sort[256]", "test_sort[4096]", "test_matmul"]


def test_empty_benchmarks_list() -> None:
    doc = json.loads(_text("with_data.json"))
    doc["benchmarks"] = []
    assert parse(json.dumps(doc), source="x") == []


def test_duplicate_fullname_is_an_error() -> None:
    doc = json.loads(_text("with_data.json"))
    doc["benchmarks"].append(doc["benchmarks"][1])
    err = _err(json.dumps(doc, indent=4))
    assert "benchmarks[4].fullname: duplicate benchmark 'test_ops_bench.py::test_sort[4096]'" in str(err)
    assert "first at benchmarks[1]" in str(err)
    assert err.line is not None


def test_non_finite_extra_info_is_kept_as_text() -> None:
    doc = json.loads(_text("with_data.json"))
    doc["benchmarks"][2]["extra_info"]["ratio"] = float("nan")
    (_, _, matmul, _) = parse(json.dumps(doc), source="x")
    assert matmul.params["extra_info"]["ratio"] == "NaN"


def test_syntax_error_carries_its_line() -> None:
    text = _text("with_data.json")
    broken = text.replace('"median": 0.00023453399999766588,', '"median": 0.00023453399999766588,,')
    assert broken != text
    err = _err(broken)
    assert err.line == 249
    assert str(err).startswith("bench.json:249: invalid JSON")


def test_truncated_file() -> None:
    text = _text("with_data.json")
    lines = text.splitlines(keepends=True)
    err = _err("".join(lines[:300]))
    assert "invalid JSON" in str(err)
    assert err.line == 301


def test_bad_stat_value_names_the_key_path_and_line() -> None:
    text = _text("with_data.json")
    err = _err(text.replace('"median": 0.00023453399999766588', '"median": "fast"'))
    assert 'benchmarks[1].stats.median: expected a finite number, got "fast"' in str(err)
    assert err.line == 249


def test_nan_round_is_rejected() -> None:
    doc = json.loads(_text("with_data.json"))
    doc["benchmarks"][3]["stats"]["data"][2] = float("nan")
    text = json.dumps(doc, indent=4)
    err = _err(text)
    assert "benchmarks[3].stats.data[2]: expected a finite number, got NaN" in str(err)
    assert text.splitlines()[err.line - 1].strip() == "NaN,"


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda d: d["benchmarks"][0].pop("stats"), "benchmarks[0].stats: missing required key"),
    (lambda d: d["benchmarks"][0].pop("name"), "benchmarks[0].name: missing required key"),
    (lambda d: d["benchmarks"][0]["stats"].update(rounds=0), "benchmarks[0].stats.rounds: "),
    (lambda d: d["benchmarks"][0]["stats"].update(rounds=5.0), "benchmarks[0].stats.rounds: expected an integer"),
    (lambda d: d["benchmarks"][0]["stats"].update(data=[]), "benchmarks[0].stats.data: "),
    (lambda d: d["benchmarks"][1].update(extra_info=None), "benchmarks[1].extra_info: expected an object"),
    (lambda d: d.update(benchmarks={}), "benchmarks: expected a list, got an object"),
    (lambda d: d.pop("benchmarks"), "benchmarks: missing required key"),
])
def test_schema_errors(mutate, expected: str) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(_text("with_data.json"))
    mutate(doc)
    err = _err(json.dumps(doc, indent=4))
    assert expected in str(err)
    assert err.line is not None


def test_top_level_must_be_an_object() -> None:
    assert "expected a JSON object at the top level, got a list" in str(_err("[]"))
    assert "empty results file" in str(_err(""))
