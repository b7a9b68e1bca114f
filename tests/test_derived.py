"""One verdict per measurement (zlops.judge.derived): derived metrics follow the timing they come from, on real
FlagGems H200 records (tests/data/flaggems_h200, PROVENANCE.md there), and open no alert of their own."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
import statistics
from pathlib import Path

import pytest

from zlops import metrics
from zlops.alerts.lifecycle import plan_night
from zlops.formats import flaggems_record
from zlops.judge.compare import JudgeInputs, build_comparisons
from zlops.judge.derived import follow_sources
from zlops.judge.setup import JudgingSetup
from zlops.model import BaselinePoint, CaseResult, Comparison, Figures, Thresholds, Verdict
from zlops.stats import Policy

DATA = Path(__file__).parent / "data" / "flaggems_h200"
A_NIGHTS = ("04_full_r1_A.log", "08_full_r2_A.log", "12_full_r3_A.log", "14_full_r4_A.log")
C_NIGHTS = ("05_full_r1_C.log", "07_full_r2_C.log", "10_full_r3_C.log", "15_full_r4_C.log")
DERIVED_OF_LATENCY = ("speedup", "tflops")   # these records carry no gbps


def _night(name: str) -> dict[tuple[str, str, str], CaseResult]:
    return {("gpu", r.case, r.metric): r
            for r in flaggems_record.parse((DATA / name).read_text(encoding="utf-8"), source=name)}


def _rows(base: str, head: str, setup: JudgingSetup, *, history: tuple[str, ...] = ()) -> list[Comparison]:
    heads = _night(head)
    bases = {k: BaselinePoint.of_samples("night-base", "a" * 40, r.unit, r.samples) for k, r in _night(base).items()}
    past = [_night(n) for n in history]
    inputs = JudgeInputs(history={k: [statistics.median(p[k].samples) for p in past if k in p] for k in heads})
    return build_comparisons(suite="flaggems", pools=["gpu"], head=heads, baselines=bases,
                             newest_baseline_run={"gpu": "night-base"}, setup=setup, inputs=inputs)


def _by(rows: list[Comparison]) -> dict[tuple[str, str], Comparison]:
    return {(c.case, c.metric): c for c in rows}


def _assert_one_verdict(rows: list[Comparison]) -> int:
    """Every derived row has its latency's verdict and the inverse change; returns how many were checked."""
    by = _by(rows)
    checked = 0
    for (case, metric), c in by.items():
        rule = metrics.derived_from(metric)
        if rule is None:
            continue
        src = by[(case, rule.source)]
        assert c.verdict is src.verdict, (case, metric, c.verdict, src.verdict)
        if src.judgement.change_pct is not None:
            assert c.follows == rule.source
            ratio_src = 1 + src.judgement.change_pct / 100
            assert 1 + c.judgement.change_pct / 100 == pytest.approx(ratio_src ** rule.power, rel=1e-9)
            assert c.head_value == pytest.approx(c.head.median)   # tonight's own value is what is shown
        checked += 1
    return checked


def test_same_code_latency_regression_and_speedup_improvement_become_one_verdict() -> None:
    """A vs A (the same code, two fresh H200 processes), the plain 2%/5% judge: judged on its own, exp's
    smallest shape read latency +11.79% (regression) and speedup +4.83% (improved) from ONE measurement."""
    simple = JudgingSetup("simple", Thresholds(2.0, 5.0))
    rows = _rows(A_NIGHTS[1], A_NIGHTS[2], simple)
    by = _by(rows)
    lat = by[("exp/float16/(64x64)", "latency")]
    assert lat.verdict is Verdict.REGRESSION and lat.judgement.change_pct == pytest.approx(11.79, abs=0.01)
    for metric in DERIVED_OF_LATENCY:
        d = by[("exp/float16/(64x64)", metric)]
        assert d.verdict is Verdict.REGRESSION and d.follows == "latency"
        assert d.judgement.change_pct == pytest.approx((1 / 1.1179 - 1) * 100, abs=0.01)
        # worse as a ratio (#22): a speedup falling to 1/1.1179 is as much worse as the latency's +11.79%
        assert d.judgement.worse_pct == pytest.approx(lat.judgement.worse_pct)
    # torch's own timing is its own series: not derived, its own verdict
    base = by[("exp/float16/(64x64)", "latency_base")]
    assert base.follows == "" and base.judgement.change_pct != pytest.approx(lat.judgement.change_pct, abs=0.5)
    assert _assert_one_verdict(rows) == 25 + 20


def test_noise_judge_on_the_abs_change_one_verdict_per_case() -> None:
    """C (abs launches its kernel twice) against four A nights, the noise judge: every derived row follows."""
    noise = JudgingSetup("noise", Thresholds(2.0, 5.0), Policy(potential_pct=2.0, regression_pct=5.0))
    rows = _rows(A_NIGHTS[3], C_NIGHTS[0], noise, history=A_NIGHTS)
    by = _by(rows)
    big = by[("abs/float16/(1024x1024x1024)", "latency")]
    assert big.verdict in (Verdict.SUSPECT, Verdict.REGRESSION, Verdict.SEVERE)
    assert by[("abs/float16/(1024x1024x1024)", "speedup")].verdict is big.verdict
    assert _assert_one_verdict(rows) == 25 + 20


def test_follow_sources_is_idempotent_and_leaves_lone_metrics_alone() -> None:
    simple = JudgingSetup("simple", Thresholds(2.0, 5.0))
    rows = _rows(A_NIGHTS[0], A_NIGHTS[1], simple)
    assert follow_sources(rows) == rows == follow_sources(follow_sources(rows))
    # a speedup whose case has no latency series tonight keeps its own verdict
    lone = [c for c in rows if c.metric != "latency"]
    own = [c for c in _rows(A_NIGHTS[0], A_NIGHTS[1], simple) if c.metric == "speedup"]
    again = _by(follow_sources([dataclasses.replace(c, judgement=dataclasses.replace(
        c.judgement, figures=dataclasses.replace(c.figures, follows=""))) for c in lone]))
    assert all(again[(c.case, "speedup")].follows == "" for c in own)


def test_derived_rows_open_no_alert_one_per_regressed_case() -> None:
    simple = JudgingSetup("simple", Thresholds(2.0, 5.0))
    rows = _rows(A_NIGHTS[1], A_NIGHTS[2], simple)
    steps = plan_night(rows, {}, band_pct=2.0)
    assert steps and all(s.comparison.metric in ("latency", "latency_base") for s in steps)
    per_case = {}
    for s in steps:
        per_case.setdefault((s.comparison.case, s.comparison.metric), 0)
        per_case[(s.comparison.case, s.comparison.metric)] += 1
    assert per_case[("exp/float16/(64x64)", "latency")] == 1
    assert not any(k == ("exp/float16/(64x64)", m) for k in per_case for m in DERIVED_OF_LATENCY)


def test_follows_is_kept_by_the_store_format() -> None:
    f = Figures(reference=2.0, reference_label="r", value=1.0, value_label="v", lower_is_better=False,
                follows="latency")
    assert Figures.from_dict(f.to_dict()) == f
    plain = dataclasses.replace(f, follows="")
    assert "follows" not in plain.to_dict() and Figures.from_dict(plain.to_dict()) == plain


def test_the_registry_declares_rates_as_inverse_timings() -> None:
    assert metrics.derived_from("speedup") == metrics.Derived("speedup", "latency", -1, metrics.derived_from(
        "speedup").formula)
    assert metrics.derived_from("gbps_base").source == "latency_base"
    assert metrics.derived_from("latency_base") is None and metrics.derived_from("latency") is None
    with pytest.raises(ValueError, match="power"):
        metrics.Derived("x", "y", 2, "")


def _row(case: str, metric: str, verdict: Verdict, reference: float, value: float, *, lower: bool = True,
         unit: str = "s", threshold: float = 3.0) -> Comparison:
    from zlops.model import Judgement, Summary

    f = Figures(reference=reference, reference_label="median of 2 nights", value=value, value_label="tonight",
                lower_is_better=lower, unit=unit, threshold_pct=threshold)
    return Comparison("campaign", "h200", case, metric, unit, lower, BaselinePoint("n2", "b" * 40, unit, reference, 1),
                      Summary(value, 1), Judgement(verdict, None, None, threshold, "own", figures=f))


def test_campaign_efficiency_and_ratio_follow_their_timings() -> None:
    """The H200x2 noise nights' night 3 (tests/data/campaign_h200x2/noise_2026-12-01/night3.report.md): NCCL
    tree at P=2 made 2x slower. Its timing confirmed +98.82% (P=1 unchanged -0.10%): the efficiency at P=2
    and the nccl/ring ratio at P=2 follow as confirmed severe, with the sources' product as their change;
    rows whose P=1 timing was unmeasurable are unmeasurable; an untouched variant stays unchanged."""
    rows = [
        _row("allreduce/64MiB/p1/tree/nccl", "execute_s", Verdict.UNCHANGED, 3.574e-05, 3.571e-05),
        _row("allreduce/64MiB/p2/tree/nccl", "execute_s", Verdict.SEVERE, 2.813e-04, 5.594e-04),
        _row("allreduce/64MiB/p2/tree/ring", "execute_s", Verdict.UNCHANGED, 3.905e-04, 3.926e-04),
        _row("allreduce/64MiB/p1/ring/nccl", "execute_s", Verdict.UNMEASURABLE, 3.768e-05, 3.560e-05),
        _row("allreduce/64MiB/p2/ring/nccl", "execute_s", Verdict.UNCHANGED, 2.866e-04, 2.860e-04),
        _row("allreduce/64MiB/p1/tree/ring", "execute_s", Verdict.UNCHANGED, 3.508e-05, 3.514e-05),
    ]
    t = {(c.case, c.metric): c.head.median for c in rows}
    p1, p2 = "allreduce/64MiB/p1", "allreduce/64MiB/p2"
    rows += [   # judged on their own (one sample a night); tonight's values are those of the timings above
        _row("allreduce/64MiB/tree/nccl", "efficiency_p2", Verdict.SUSPECT, 0.06543,
             t[(f"{p1}/tree/nccl", "execute_s")] / (2 * t[(f"{p2}/tree/nccl", "execute_s")]), lower=False, unit="eff"),
        _row(f"{p2}/tree", "ratio_nccl_over_ring", Verdict.SUSPECT, 0.7175,
             t[(f"{p2}/tree/nccl", "execute_s")] / t[(f"{p2}/tree/ring", "execute_s")], unit="t/t"),
        _row("allreduce/64MiB/ring/nccl", "efficiency_p2", Verdict.SUSPECT, 0.06585,
             t[(f"{p1}/ring/nccl", "execute_s")] / (2 * t[(f"{p2}/ring/nccl", "execute_s")]), lower=False, unit="eff"),
        _row("allreduce/64MiB/tree/ring", "efficiency_p2", Verdict.SUSPECT, 0.04492,
             t[(f"{p1}/tree/ring", "execute_s")] / (2 * t[(f"{p2}/tree/ring", "execute_s")]), lower=False, unit="eff"),
        # an efficiency whose value no timing tonight reproduces (another scaling metric): keeps its own verdict
        _row("allreduce/64MiB/ring/ring", "efficiency_p2", Verdict.SUSPECT, 0.04448, 0.04317, lower=False, unit="eff"),
    ]
    rows += [_row(f"{p1}/ring/ring", "execute_s", Verdict.UNCHANGED, 3.491e-05, 3.512e-05),
             _row(f"{p2}/ring/ring", "execute_s", Verdict.UNCHANGED, 3.905e-04, 3.904e-04)]
    by = _by(follow_sources(rows))
    eff = by[("allreduce/64MiB/tree/nccl", "efficiency_p2")]
    assert eff.verdict is Verdict.SEVERE and eff.follows
    assert eff.judgement.change_pct == pytest.approx(((3.571 / 3.574) / (5.594 / 2.813) - 1) * 100, abs=1e-6)
    assert eff.judgement.change_pct == pytest.approx(-49.75, abs=0.01)
    ratio = by[("allreduce/64MiB/p2/tree", "ratio_nccl_over_ring")]
    assert ratio.verdict is Verdict.SEVERE and ratio.judgement.change_pct == pytest.approx(
        ((5.594 / 2.813) / (3.926 / 3.905) - 1) * 100, abs=1e-6)
    assert by[("allreduce/64MiB/ring/nccl", "efficiency_p2")].verdict is Verdict.UNMEASURABLE
    untouched = by[("allreduce/64MiB/tree/ring", "efficiency_p2")]
    assert untouched.verdict is Verdict.UNCHANGED and untouched.follows
    alone = by[("allreduce/64MiB/ring/ring", "efficiency_p2")]
    assert alone.verdict is Verdict.SUSPECT and not alone.follows
    assert follow_sources(follow_sources(rows)) == follow_sources(rows)
    # followed rows open no alert: the timing's alert is the case's
    steps = plan_night(follow_sources(rows), {}, band_pct=2.0)
    assert sorted((s.comparison.case, s.comparison.metric) for s in steps) == [
        ("allreduce/64MiB/p2/tree/nccl", "execute_s"), ("allreduce/64MiB/ring/ring", "efficiency_p2")]


def _ab(row: Comparison, ci: tuple[float, float]) -> Comparison:
    f = replace(row.judgement.figures, ci_pct=ci, reference_label="A/B base, 5 runs", value_label="A/B head, 5 runs")
    return replace(row, judgement=replace(row.judgement, figures=f))


def test_a_confirmed_timing_carries_its_efficiency_and_ratio_over_an_unmeasurable_one_when_the_noise_cannot_hide_it() -> None:
    """Issue 22's CPU gloo campaign: nccl/tree at P=2 made 2x slower (confirmed by its A/B), while the P=1
    timing (a 1 MiB memory copy whose processes vary ~22%) and the ring stack at P=2 are unmeasurable at 5%.
    The efficiency at P=2 and the nccl/ring ratio come out confirmed severe when the product of the sources'
    bands (the A/B CI, the unmeasurable change give or take its threshold, times its levels' span) lies
    beyond the 5% line; the same P=2 change over a P=1 that varies 3x stays unmeasurable, as does a source
    that is invalid; with no confirmed source nothing is confirmed."""
    p1, p2 = "allreduce/1MiB/p1", "allreduce/1MiB/p2"
    slowed = _ab(_row(f"{p2}/tree/nccl", "execute_s", Verdict.SEVERE, 0.0140, 0.0283, threshold=5.0), (80.0, 110.0))
    p1_noisy = _row(f"{p1}/tree/nccl", "execute_s", Verdict.UNMEASURABLE, 1.00e-4, 1.03e-4, threshold=66.0)
    ring = _row(f"{p2}/tree/ring", "execute_s", Verdict.UNMEASURABLE, 0.0150, 0.0146, threshold=20.0)
    ring = replace(ring, judgement=replace(ring.judgement, figures=replace(ring.judgement.figures,
                                                                           modes=(0.0120, 0.0150))))

    def derived(p1_row: Comparison, ring_row: Comparison) -> list[Comparison]:
        t = {(c.case, c.metric): c.head.median for c in (slowed, p1_row, ring_row)}
        return [slowed, p1_row, ring_row,
                _row("allreduce/1MiB/tree/nccl", "efficiency_p2", Verdict.SUSPECT, 0.0036,
                     t[(f"{p1}/tree/nccl", "execute_s")] / (2 * t[(f"{p2}/tree/nccl", "execute_s")]),
                     lower=False, unit="eff"),
                _row(f"{p2}/tree", "ratio_nccl_over_ring", Verdict.SUSPECT, 0.93,
                     t[(f"{p2}/tree/nccl", "execute_s")] / t[(f"{p2}/tree/ring", "execute_s")], unit="t/t")]

    by = _by(follow_sources(derived(p1_noisy, ring)))
    eff = by[("allreduce/1MiB/tree/nccl", "efficiency_p2")]
    assert eff.verdict is Verdict.SEVERE and eff.follows
    # its change is the sources' product; its CI the product of the bands: (1.03 * [1/1.66, 1.66]) / [1.8, 2.1]
    assert eff.judgement.change_pct == pytest.approx((1.03 / (0.0283 / 0.0140) - 1) * 100, abs=1e-6)
    lo, hi = eff.judgement.figures.ci_pct
    assert lo == pytest.approx((1.03 / 1.66 / 2.1 - 1) * 100, abs=1e-6)
    assert hi == pytest.approx((1.03 * 1.66 / 1.8 - 1) * 100, abs=1e-6)
    assert hi < -100 * (1 - 1 / 1.05)
    assert "unmeasurable" in eff.judgement.note and "66.00%" in eff.judgement.note
    ratio = by[(f"{p2}/tree", "ratio_nccl_over_ring")]
    assert ratio.verdict is Verdict.SEVERE        # [1.8, 2.1] / (0.9733 * [1/(1.2*1.25), 1.2*1.25]) > 1.05
    assert ratio.judgement.figures.ci_pct[0] == pytest.approx((1.8 / (0.0146 / 0.0150 * 1.2 * 1.25) - 1) * 100)
    # a P=1 that varies 3x (its threshold 200%) could hide the fall: unmeasurable, with the source named
    wild = replace(p1_noisy, judgement=replace(p1_noisy.judgement, threshold_pct=200.0))
    assert _by(follow_sources(derived(wild, ring)))[("allreduce/1MiB/tree/nccl", "efficiency_p2")].verdict \
        is Verdict.UNMEASURABLE
    invalid = replace(p1_noisy, judgement=replace(p1_noisy.judgement, verdict=Verdict.INVALID))
    assert _by(follow_sources(derived(invalid, ring)))[("allreduce/1MiB/tree/nccl", "efficiency_p2")].verdict \
        is Verdict.INVALID
    unconfirmed = [replace(c, judgement=replace(c.judgement, verdict=Verdict.SUSPECT)) if c is slowed else c
                   for c in derived(p1_noisy, ring)]
    slowed_suspect = _by(follow_sources(unconfirmed))
    assert slowed_suspect[("allreduce/1MiB/tree/nccl", "efficiency_p2")].verdict is Verdict.UNMEASURABLE
    rows = derived(p1_noisy, ring)
    assert follow_sources(follow_sources(rows)) == follow_sources(rows)
    assert sorted((s.comparison.case, s.comparison.metric) for s in plan_night(follow_sources(rows), {}, band_pct=2.0)) \
        == [(f"{p2}/tree/nccl", "execute_s")]


def test_a_derived_row_shows_no_threshold_beyond_the_line() -> None:
    """A campaign row is unmeasurable, without a threshold, when a source is unmeasurable or its line is past
    MAX_THRESHOLD_PCT (two suspects on 283% lines: nothing short of a 3.8x change could cross the row's line),
    its note naming those sources; with 5% lines the same sources give the composed threshold as before. A row
    that follows one source (bandwidth of a time) keeps its source's verdict but never a line past the cap."""
    from zlops.judge.derived import MAX_THRESHOLD_PCT
    from zlops.model import Judgement, Summary

    p1, p2 = "allreduce/1MiB/p1/ring/ring", "allreduce/1MiB/p2/ring/ring"

    def night(threshold: float) -> list[Comparison]:
        t1 = _row(p1, "execute_s", Verdict.SUSPECT, 1.0e-3, 1.5e-3, threshold=threshold)
        t2 = _row(p2, "execute_s", Verdict.SUSPECT, 2.0e-3, 9.0e-3, threshold=threshold)
        t1 = replace(t1, judgement=replace(t1.judgement, figures=replace(t1.judgement.figures, noise_pct=44.75)))
        eff = _row("allreduce/1MiB/ring/ring", "efficiency_p2", Verdict.SUSPECT, 0.25, 1.5e-3 / (2 * 9.0e-3),
                   lower=False, unit="eff")
        return [t1, t2, eff]

    wide = _by(follow_sources(night(283.0)))[("allreduce/1MiB/ring/ring", "efficiency_p2")]
    assert (wide.verdict, wide.judgement.threshold_pct, wide.judgement.figures) == (Verdict.UNMEASURABLE, None, None)
    assert wide.judgement.note == (
        f"follows execute_s of {p1} and execute_s of {p2}: unmeasurable: its sources are "
        f"({p1} execute_s: suspect, noise 44.75%, threshold beyond 100%), ({p2} execute_s: suspect, threshold "
        "beyond 100%)")
    narrow = _by(follow_sources(night(5.0)))[("allreduce/1MiB/ring/ring", "efficiency_p2")]
    assert narrow.verdict is Verdict.SUSPECT and narrow.judgement.threshold_pct == 5.0
    assert narrow.judgement.note.startswith("follows its sources: ")
    # one unmeasurable source: the row names it with what hides its change, never its (or a composed) threshold
    rows = night(5.0)
    rows[0] = replace(rows[0], judgement=Judgement(Verdict.UNMEASURABLE, 50.0, 50.0, 70112712.7,
                                                  "noise 448.68% x k=3 = 1346.0% hides a 5% change (change tonight "
                                                  "+50.00% worse)", figures=rows[0].judgement.figures))
    gap = _by(follow_sources(rows))[("allreduce/1MiB/ring/ring", "efficiency_p2")]
    assert (gap.verdict, gap.judgement.threshold_pct) == (Verdict.UNMEASURABLE, None)
    assert gap.judgement.note.endswith(f"unmeasurable: its source is ({p1} execute_s: noise 448.68% x k=3 = 1346.0%)")
    # bandwidth follows its time: the same verdict, no threshold past the cap
    bw = Comparison("campaign", "h200", p2, "bw_execute", "GB/s", False, None, Summary(0.1165, 1),
                    Judgement(Verdict.SUSPECT, None, None, 2.0, "own"))
    followed = _by(follow_sources([*night(283.0), bw]))[(p2, "bw_execute")]
    assert followed.verdict is Verdict.SUSPECT and followed.judgement.threshold_pct is None
    assert followed.judgement.figures is not None and followed.judgement.figures.threshold_pct is None
    kept = _by(follow_sources([*night(5.0), bw]))[(p2, "bw_execute")]
    assert kept.judgement.threshold_pct == 5.0 <= MAX_THRESHOLD_PCT
