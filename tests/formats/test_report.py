"""The ParseReport returned by the text adapters' parse_with_report, and stamp()."""

from __future__ import annotations

from zlops.formats._report import Dropped, ParseReport, stamp
from zlops.model import CaseResult


def _case(name: str) -> CaseResult:
    return CaseResult(case=name, metric="host", unit="us", lower_is_better=True, samples=(1.0,), params={"a": 1})


def test_counts_and_kinds() -> None:
    rep = ParseReport((_case("x"),), (Dropped("failed", "a (Case1)", "non-zero", 7), Dropped("skipped", "b", "no test"),
                                      Dropped("failed", "c", "no timing", 9)))
    assert rep.counts() == {"failed": 2, "skipped": 1}
    assert [d.item for d in rep.failed] == ["a (Case1)", "c"]
    assert [d.item for d in rep.skipped] == ["b"]
    assert not rep.measured_nothing and ParseReport(()).measured_nothing
    assert str(rep.dropped[0]) == "line 7: failed: a (Case1): non-zero"
    assert str(rep.dropped[1]) == "skipped: b: no test"


def test_stamp_merges_file_level_facts_without_mutating() -> None:
    original = _case("x")
    (stamped,) = stamp([original], {"torn_records": 2, "a": 3})
    assert stamped.params == {"a": 3, "torn_records": 2}
    assert original.params == {"a": 1}
