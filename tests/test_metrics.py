from __future__ import annotations

import math
from pathlib import Path

import pytest

from zlops import metrics
from zlops.metrics import (
    Unit,
    UnknownUnit,
    convert,
    format_value,
    lower_is_better,
    unit_info,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "formats.md"


def test_required_units_are_registered() -> None:
    required = ["s", "ms", "us", "ns", "B/s", "KB/s", "MB/s", "GB/s", "MiB/s", "GiB/s", "TFLOPS",
                "GFLOPS", "ops/s", "items/s", "x", "count", "B", "MiB", "GiB", "%"]
    assert set(required) <= set(metrics.unit_symbols())


@pytest.mark.parametrize("alias", ["µs", "μs", "usec", "us"])  # micro sign U+00B5, greek mu U+03BC
def test_microsecond_aliases(alias: str) -> None:
    info = unit_info(alias)
    assert info.symbol == "us"
    assert info.kind == "time"
    assert info.scale == 1e-6


def test_lookup_is_case_sensitive_and_unknown_lists_known_units() -> None:
    with pytest.raises(UnknownUnit) as excinfo:
        unit_info("Ms")
    assert isinstance(excinfo.value, ValueError)
    message = str(excinfo.value)
    assert "unknown unit 'Ms'" in message
    assert "ms" in message and "GiB/s" in message and "µs=us" in message


def test_unit_entries_are_well_formed() -> None:
    for unit in metrics.UNITS:
        assert unit.kind in metrics.KINDS
        assert unit_info(unit.base).scale == 1.0, f"{unit.symbol}: base {unit.base} must be scale 1"
        assert unit_info(unit.base).kind == unit.kind


def test_unit_validates_its_fields() -> None:
    with pytest.raises(ValueError, match=r"Unit\.kind"):
        Unit("q", "q", "speed", "q", 1.0, True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Unit\.scale"):
        Unit("q", "q", "other", "q", 0.0, True)
    with pytest.raises(ValueError, match=r"Unit\.symbol"):
        Unit(" q", "q", "other", "q", 1.0, True)


def test_registry_rejects_a_name_defined_twice() -> None:
    with pytest.raises(ValueError, match="'ms' is defined twice"):
        metrics._index((Unit("ms", "a", "time", "s", 1e-3, True), Unit("msec", "b", "time", "s", 1e-3,
                                                                       True, ("ms",))))


@pytest.mark.parametrize(("value", "src", "dst", "expected"), [
    (1.5, "ms", "us", 1500.0),
    (2.0, "s", "ns", 2e9),
    (250.0, "µs", "ms", 0.25),
    (1.0, "GiB/s", "MB/s", 1073.741824),
    (3.0, "GB/s", "MB/s", 3000.0),
    (1.0, "MiB/s", "KiB/s", 1024.0),
    (2.0, "TFLOPS", "GFLOPS", 2000.0),
    (1.0, "GiB", "MiB", 1024.0),
    (1.0, "GB", "B", 1e9),
    (7.0, "count", "count", 7.0),
])
def test_convert(value: float, src: str, dst: str, expected: float) -> None:
    assert convert(value, src, dst) == pytest.approx(expected, rel=1e-12)


def test_convert_round_trip_is_stable() -> None:
    assert convert(convert(0.123, "ms", "ns"), "ns", "ms") == pytest.approx(0.123, rel=1e-15)


@pytest.mark.parametrize(("src", "dst"), [("ms", "MB/s"), ("TFLOPS", "items/s"), ("%", "x"),
                                          ("B", "B/s"), ("count", "ops/s")])
def test_convert_refuses_different_quantities(src: str, dst: str) -> None:
    with pytest.raises(ValueError, match="cannot convert"):
        convert(1.0, src, dst)


@pytest.mark.parametrize(("unit", "expected"), [
    ("s", True), ("ns", True), ("µs", True), ("GB/s", False), ("GiB/s", False), ("TFLOPS", False),
    ("ops/s", False), ("items/s", False), ("x", False), ("MiB", True),
])
def test_registry_direction(unit: str, expected: bool) -> None:
    assert metrics.has_direction(unit)
    assert lower_is_better(unit) is expected
    assert lower_is_better(unit, expected) is expected


def test_declared_direction_cannot_contradict_the_registry() -> None:
    with pytest.raises(ValueError) as excinfo:
        lower_is_better("ms", False)
    assert "lower_is_better=false contradicts unit 'ms'" in str(excinfo.value)
    assert "lower is better" in str(excinfo.value)
    with pytest.raises(ValueError, match="contradicts unit 'x'"):
        lower_is_better("x", True)


@pytest.mark.parametrize("unit", ["count", "%"])
def test_directionless_units_need_a_declaration(unit: str) -> None:
    assert not metrics.has_direction(unit)
    with pytest.raises(ValueError, match="no inherent direction"):
        lower_is_better(unit)
    assert lower_is_better(unit, True) is True
    assert lower_is_better(unit, False) is False


@pytest.mark.parametrize(("value", "unit", "text"), [
    (1.23456, "ms", "1.235 ms"),
    (0.5, "s", "0.5 s"),
    (123456.7, "ns", "123457 ns"),
    (1234.5, "us", "1234 us"),
    (5.6464e-06, "s", "5.646e-06 s"),
    (0.0, "GB/s", "0 GB/s"),
    (-2.5, "%", "-2.5%"),
    (1.4213, "x", "1.421x"),
    (812.49, "µs", "812.5 us"),
    (math.inf, "s", "inf s"),
])
def test_format_value(value: float, unit: str, text: str) -> None:
    assert format_value(value, unit) == text


def test_format_value_unknown_unit() -> None:
    with pytest.raises(UnknownUnit):
        format_value(1.0, "parsecs")


def test_docs_units_table_is_generated_from_the_registry() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    assert metrics.units_table_markdown() in docs, (
        "docs/formats.md units table is stale; regenerate it with "
        "python -c 'from zlops.metrics import units_table_markdown as t; print(t())'")
    for unit in metrics.UNITS:
        assert f"| `{unit.symbol}` |" in docs
        for alias in unit.aliases:
            assert f"`{alias}`" in docs


def test_docs_list_the_derived_metrics_of_the_registry() -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text(encoding="utf-8")
    assert metrics.derived_table_markdown() in docs, (
        "docs/formats.md's derived-metrics table is out of date; regenerate it with "
        "python -c 'from zlops.metrics import derived_table_markdown as t; print(t())'")
