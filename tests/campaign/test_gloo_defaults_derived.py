"""A campaign's derived rows over unmeasurable timings carry no threshold no change could reach.

The CPU gloo hold-out (tests/data/campaign_gloo_cpu_defaults/run7, its PROVENANCE.md one folder up) recorded
``allreduce/1MiB/ring/ring efficiency_p2`` as "unmeasurable, threshold 70112713%" on nights 4-6: the threshold of
its P=1 timing, whose processes varied 448% (``expm1(3 x 4.4868)``), handed to the efficiency. Here each night's
measured rows are taken as the record judged them (verdict, figures, threshold, note) and
:func:`zlops.judge.derived.follow_sources` derives the efficiency, ratio and bandwidth rows again: none shows a
threshold beyond :data:`zlops.judge.derived.MAX_THRESHOLD_PCT`, the unmeasurable ones name the sources that make
them so, and a derived row over judged sources keeps the verdict and threshold the record gave it.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from zlops.judge.derived import MAX_THRESHOLD_PCT, follow_sources
from zlops.model import BaselinePoint, Comparison, Figures, Judgement, Summary, Verdict, worse_pct

RUN = Path(__file__).resolve().parents[1] / "data" / "campaign_gloo_cpu_defaults" / "run7"
UNIT = {"execute_s": "s", "setup_s": "s", "wall_s": "s", "bw_execute": "GB/s", "efficiency_p2": "eff",
        "ratio_nccl_over_ring": "t/t"}
DERIVED = ("bw_execute", "efficiency_p2", "ratio_nccl_over_ring")


@cache
def _nights() -> list[dict[str, Any]]:
    return json.loads((RUN / "nights.json").read_text())


def _comparison(r: dict[str, Any]) -> Comparison:
    """A recorded row as the judge left it (before the derived rows followed their sources)."""
    unit, lower = UNIT[r["metric"]], bool(r["lower_is_better"])
    figures = worse = None
    if r["base"] is not None and r["head"] is not None and r["reference_label"]:
        figures = Figures(reference=r["base"], reference_label=r["reference_label"], value=r["head"],
                          value_label="tonight", lower_is_better=lower, unit=unit, threshold_pct=r["threshold_pct"])
        worse = worse_pct(r["base"], r["head"], lower_is_better=lower)
    return Comparison("collectives", "h200", r["case"], r["metric"], unit, lower,
                      None if r["baseline"] is None else BaselinePoint("n0", "0" * 40, unit, r["baseline"], 1),
                      Summary(r["tonight"], 1),
                      Judgement(Verdict(r["verdict"]), r["change_pct"], worse, r["threshold_pct"], r["note"],
                                figures=figures))


def _derived(night: int) -> dict[tuple[str, str], Comparison]:
    [rows] = [n["rows"] for n in _nights() if n["night"] == night]
    out = follow_sources([_comparison(r) for r in rows])
    return {(c.case, c.metric): c for c in out if c.metric in DERIVED}


def _recorded(night: int) -> dict[tuple[str, str], dict[str, Any]]:
    [rows] = [n["rows"] for n in _nights() if n["night"] == night]
    return {(r["case"], r["metric"]): r for r in rows}


def test_the_record_shows_the_absurd_threshold() -> None:
    rec = _recorded(5)[("allreduce/1MiB/ring/ring", "efficiency_p2")]
    assert rec["verdict"] == "unmeasurable" and round(rec["threshold_pct"]) == 70112713


@pytest.mark.parametrize("night", [2, 3, 4, 5, 6])
def test_no_derived_row_carries_a_threshold_beyond_the_line(night: int) -> None:
    rows = _derived(night)
    assert {m for _, m in rows} == set(DERIVED)
    wide = {k: c.judgement.threshold_pct for k, c in rows.items()
            if c.judgement.threshold_pct is not None and not (math.isfinite(c.judgement.threshold_pct)
                                                            and c.judgement.threshold_pct <= MAX_THRESHOLD_PCT)}
    assert wide == {}
    for k, c in rows.items():
        if k[1] != "bw_execute" and c.verdict is Verdict.UNMEASURABLE:
            assert c.judgement.threshold_pct is None and "unmeasurable: its source" in c.judgement.note, k
            assert c.judgement.note.startswith("follows "), k   # still counted as derived (zlops.judge.coverage)


def test_the_efficiency_over_the_noisy_p1_timing_names_it_instead_of_a_number() -> None:
    """Night 4: the P=1 timing alone is unmeasurable (P=2 a suspect improvement); nights 5 and 6 (the slowdown):
    both are, and both are named with what hides their change."""
    p1 = "(allreduce/1MiB/p1/ring/ring execute_s: noise 448.68% x k=3 = 1346.0%)"
    names = "follows execute_s of allreduce/1MiB/p1/ring/ring and execute_s of allreduce/1MiB/p2/ring/ring"
    expected = {4: f"{names}: unmeasurable: its source is {p1}",
                5: f"{names}: unmeasurable: its sources are {p1}, "
                   "(allreduce/1MiB/p2/ring/ring execute_s: noise 44.75% x k=3 = 134.2%)",
                6: f"{names}: unmeasurable: its sources are {p1}, "
                   "(allreduce/1MiB/p2/ring/ring execute_s: noise 56.02% x k=3 = 168.1%)"}
    for night, note in expected.items():
        eff = _derived(night)[("allreduce/1MiB/ring/ring", "efficiency_p2")]
        assert (eff.verdict, eff.judgement.threshold_pct, eff.judgement.note) == (Verdict.UNMEASURABLE, None, note)
        assert eff.judgement.figures is None


def test_a_derived_row_over_judged_sources_keeps_its_composed_threshold() -> None:
    """Nights 2-4 hold efficiency and ratio rows whose sources were judged (suspects, unchanged): replayed,
    each gets the verdict and the threshold (the largest of its sources') the record gave it."""
    kept = 0
    for night in (2, 3, 4):
        rec = _recorded(night)
        for key, c in _derived(night).items():
            r = rec[key]
            if key[1] == "bw_execute" or not r["note"].startswith("follows its sources"):
                continue
            assert (c.verdict.value, c.judgement.threshold_pct) == (r["verdict"], r["threshold_pct"]), (night, key)
            assert c.judgement.note == r["note"], (night, key)
            kept += 1
    assert kept >= 10
    p2_ring = _derived(4)[("allreduce/1MiB/p2/ring", "ratio_nccl_over_ring")]
    assert p2_ring.verdict is Verdict.SUSPECT and p2_ring.judgement.threshold_pct == pytest.approx(9.185892814358498)
