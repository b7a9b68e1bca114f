"""Derived series maths and the wording of scaling verdicts."""

from __future__ import annotations

import json

import pytest

from zlops.campaign import scaling
from zlops.model import CaseResult, Comparison, Figures, Judgement, Summary, Verdict


def _r(case: str, p: int, variant: str, stack: str, t: float, metric: str = "execute_s") -> CaseResult:
    shard = {"case": case, "size": 1 << 20, "size_label": "1MiB", "p": p, "variant": variant, "stack": stack}
    return CaseResult(f"{case}/1MiB/p{p}/{variant}/{stack}", metric, "s", True, (t,), {"campaign": shard})


def test_efficiency_is_t_pmin_times_pmin_over_t_p_times_p() -> None:
    rows = [_r("ar", 2, "ring", "nccl", 4.0), _r("ar", 4, "ring", "nccl", 2.5), _r("ar", 8, "ring", "nccl", 1.6),
            _r("ar", 2, "ring", "nccl", 9.9, metric="bw_execute")]
    out = {r.metric: r for r in scaling.derive(rows, [])}
    assert set(out) == {"efficiency_p4", "efficiency_p8"}  # P_min = 2 is the reference, E(2) = 1 is not a series
    assert out["efficiency_p4"].samples == pytest.approx((4.0 * 2 / (2.5 * 4),))  # 0.8
    assert out["efficiency_p8"].samples == pytest.approx((4.0 * 2 / (1.6 * 8),))  # 0.625
    e = out["efficiency_p4"]
    assert e.case == "ar/1MiB/ring/nccl" and e.unit == "eff" and e.lower_is_better is False
    assert e.params["t_p_min"] == 4.0 and e.params["t_p"] == 2.5 and e.params["p_min"] == 2


def test_single_p_gives_no_efficiency_and_ratios_need_both_stacks() -> None:
    rows = [_r("ar", 2, "ring", "pypto", 3.0), _r("ar", 2, "ring", "simpler", 2.0), _r("ar", 2, "tree", "pypto", 1.0)]
    out = scaling.derive(rows, [["pypto", "simpler"]])
    assert [(r.case, r.metric, r.samples) for r in out] == [("ar/1MiB/p2/ring", "ratio_pypto_over_simpler", (1.5,))]
    assert out[0].unit == "t/t" and out[0].lower_is_better is True


def test_derived_rows_are_never_inputs() -> None:
    rows = [_r("ar", 1, "v", "s", 2.0), _r("ar", 2, "v", "s", 1.25)]
    first = scaling.derive(rows, [])
    assert scaling.derive([*rows, *first], []) == first


def _cmp(metric: str, case: str, ref: float, value: float, verdict: Verdict, lower: bool) -> Comparison:
    fig = Figures(ref, "baseline abc1234", value, "tonight", lower_is_better=lower, unit="eff")
    return Comparison("s", "h200", case, metric, "eff", lower, None, Summary(value, 1),
                      Judgement(verdict, None, None, 2.0, figures=fig))


def test_scaling_verdicts_are_worded_from_the_verdict_figures() -> None:
    c = _cmp("efficiency_p2", "ar/64MiB/tree/nccl", 0.82, 0.7216, Verdict.REGRESSION, False)
    assert scaling.describe(c) == ("efficiency at P=2 fell 12.0% (0.82 -> 0.722; baseline abc1234 vs tonight)")
    r = _cmp("ratio_nccl_over_ring", "ar/64MiB/p2/tree", 0.5, 0.9, Verdict.REGRESSION, True)
    assert scaling.describe(r).startswith("nccl/ring time ratio at P=2 rose 80.0% (0.5 -> 0.9")
    assert scaling.describe(_cmp("execute_s", "x", 1, 2, Verdict.REGRESSION, True)) is None
    lines = scaling.scaling_lines([c, r, _cmp("efficiency_p4", "y", 0.8, 0.8, Verdict.UNCHANGED, False)])
    assert len(lines) == 2 and "scaling regression" in lines[0] and "ratio" in lines[0]  # worst first


def test_alert_lines_word_derived_series_as_scaling_changes() -> None:
    """The alert announcement, thread replies and digest lines say "efficiency at P=2 fell 12.0%" as the
    report does; a measured series keeps its signed percentage."""
    from datetime import datetime, timezone

    from zlops.alerts import messages as alert_messages
    from zlops.alerts.lifecycle import Alert, AlertState, EventKind, Step
    from zlops.model import BaselinePoint, Comparison, Judgement, Verdict

    t0 = datetime(2026, 11, 30, tzinfo=timezone.utc)

    def alert(case: str, metric: str, unit: str, lib: bool) -> Alert:
        return Alert(id=3, suite="coll", pool="h200", case=case, metric=metric, unit=unit, lower_is_better=lib,
                     state=AlertState.CONFIRMED, opened_run="n3", last_run="n3", base_value=0.8, band_pct=2.0,
                     first_base_sha="1" * 40, first_head_sha="2" * 40, last_head_sha="2" * 40,
                     last_change_pct=-12.0, worst_worse_pct=12.0, thread_notification_id=None, thread_ts=None,
                     channel_id=None, note="", opened_at=t0, updated_at=t0)

    eff = alert("allreduce/4MiB/tree/nccl", "efficiency_p2", "eff", False)
    ratio = alert("allreduce/4MiB/p2/tree", "ratio_nccl_over_ring", "t/t", True)
    plain = alert("allreduce/4MiB/p2/tree/nccl", "execute_s", "s", True)

    def step(a: Alert, change: float) -> Step:
        c = Comparison("coll", a.pool, a.case, a.metric, a.unit, a.lower_is_better,
                       BaselinePoint("n2", "1" * 40, a.unit, 0.8, 1), Summary(0.8 * (1 + change / 100), 1),
                       Judgement(Verdict.REGRESSION, change, -change if not a.lower_is_better else change, 2.0))
        return Step(c, 3, None, AlertState.CONFIRMED, EventKind.OPENED, True, change,
                    -change if not a.lower_is_better else change)

    text = json.dumps(alert_messages.announcement([(eff, step(eff, -12.0)), (ratio, step(ratio, 8.0)),
                                                   (plain, step(plain, 50.0))], channel="c", suite="coll",
                                                  run_key="n3"))
    assert "efficiency at P=2 fell 12.0%" in text and "nccl/ring time ratio at P=2 rose 8.0%" in text
    assert "+50.00%" in text or "+50.0%" in text
    line = alert_messages.event_line(eff, "state", "fixed", change_pct=-12.0)
    assert "efficiency at P=2 fell 12.0%" in line
    digest = alert_messages.digest_line(ratio, {"kind": "opened", "to_state": "confirmed", "change_pct": 8.0})
    assert "nccl/ring time ratio at P=2 rose 8.0%" in digest


def test_the_report_says_none_moved_only_of_what_was_judged() -> None:
    """Run 5's last night (tests/data/campaign_gloo_h200host) read "No strong-scaling efficiency or stack ratio moved
    beyond its threshold tonight" above eight rows all `unmeasurable` (+79.76%, +87.00% ...): the noise hid them."""
    from zlops.model import CompareSummary
    from zlops.report.markdown import campaign_section

    hidden = [_cmp("efficiency_p2", "ar/1MiB/tree/nccl", 0.18, 0.13, Verdict.UNMEASURABLE, False),
              _cmp("ratio_nccl_over_ring", "ar/1MiB/p1/ring", 1.0, 1.8, Verdict.UNMEASURABLE, True)]
    quiet = [_cmp("efficiency_p2", "ar/1MiB/ring/ring", 0.10, 0.10, Verdict.UNCHANGED, False)]
    text = "\n".join(campaign_section(None, CompareSummary("k", "s", "a" * 40, tuple(hidden + quiet))))
    assert "No strong-scaling efficiency or stack ratio was flagged tonight (2 unmeasurable: not judged" in text
    assert "moved beyond its threshold" not in text
    text = "\n".join(campaign_section(None, CompareSummary("k", "s", "a" * 40, tuple(quiet))))
    assert "No strong-scaling efficiency or stack ratio was flagged tonight." in text
