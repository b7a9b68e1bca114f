"""The regression lifecycle (pure): which series open, confirm, worsen or fix an alert, and who may change what."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest

from zlops.alerts.lifecycle import (
    Alert,
    AlertError,
    AlertState,
    EventKind,
    check_human_transition,
    clusters,
    commit_range,
    op_family,
    plan_night,
    worse_pct,
)
from zlops.model import BaselinePoint, Comparison, Judgement, Summary, Verdict

BASE_SHA, HEAD_SHA = "1" * 40, "2" * 40
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def cmp(case: str, verdict: Verdict, base: float | None, head: float | None, *, pool: str = "npu",
        metric: str = "time", unit: str = "ms", lower_is_better: bool = True) -> Comparison:
    change = None if base is None or head is None else (head - base) / base * 100
    worse = None if change is None else (change if lower_is_better else -change)
    return Comparison("kernels", pool, case, metric, unit, lower_is_better,
                      None if base is None else BaselinePoint("n1", BASE_SHA, unit, base, 1),
                      None if head is None else Summary(head, 1), Judgement(verdict, change, worse, 2.0))


def alert(case: str = "softmax_8192", state: AlertState = AlertState.CONFIRMED, *, base: float = 4.0,
          worst: float | None = 10.0, pool: str = "npu", lower_is_better: bool = True) -> Alert:
    return Alert(id=7, suite="kernels", pool=pool, case=case, metric="time", unit="ms",
                 lower_is_better=lower_is_better, state=state, opened_run="n2", last_run="n2", base_value=base,
                 band_pct=2.0, first_base_sha=BASE_SHA, first_head_sha=HEAD_SHA, last_head_sha=HEAD_SHA,
                 last_change_pct=worst, worst_worse_pct=worst, thread_notification_id=None, thread_ts=None,
                 channel_id=None, note="", opened_at=T0, updated_at=T0)


@pytest.mark.parametrize(("case", "family"), [
    ("abs/float16/(64x64)", "abs"), ("softmax_8192", "softmax"), ("layer_norm_8192", "layer_norm"),
    ("matmul_bf16", "matmul"), ("add_16M", "add"), ("benchmark_bgemm (Case0)", "benchmark_bgemm"),
    ("test_add[fp32-1024]", "test_add"), ("BM_Add/1024", "BM_Add"), ("add<fp32>", "add"),
    ("mesh_p2_count65536_fp32_a2a3_d0-1/hccl", "mesh"), ("index_select", "index_select"), ("alpha", "alpha"),
    ("int8_gemm", "int8_gemm"),
])
def test_op_family(case: str, family: str) -> None:
    assert op_family(case) == family


def test_commit_range_and_worse_pct() -> None:
    assert commit_range(BASE_SHA, HEAD_SHA) == "1111111..2222222"
    assert commit_range(None, HEAD_SHA) == "..2222222"
    assert worse_pct(4.0, 4.4, lower_is_better=True) == pytest.approx(10.0)
    # a throughput that fell is worse by the ratio (issue 22): to 90% is +11.1%, to 15% is +567%, as a 6.7x time
    assert worse_pct(100.0, 90.0, lower_is_better=False) == pytest.approx(11.111, abs=1e-3)
    assert worse_pct(100.0, 15.0, lower_is_better=False) == pytest.approx(566.67, abs=0.01)
    assert worse_pct(100.0, 200.0, lower_is_better=False) == pytest.approx(-50.0)
    assert worse_pct(0.0, 1.0, lower_is_better=True) is None


def test_regression_opens_a_confirmed_announced_alert_suspect_an_unannounced_new_one() -> None:
    steps = plan_night([cmp("softmax_8192", Verdict.REGRESSION, 4.0, 4.4),
                        cmp("gelu", Verdict.SUSPECT, 2.0, 2.1),
                        cmp("gemm", Verdict.POTENTIAL, 2.0, 2.06),
                        cmp("add", Verdict.IMPROVED, 2.0, 1.8),
                        cmp("relu", Verdict.UNCHANGED, 2.0, 2.0),
                        cmp("conv", Verdict.NEW, None, 3.0)], {}, band_pct=2.0)
    got = {s.comparison.case: (s.alert_id, s.to_state, s.event, s.announce) for s in steps}
    assert got == {"softmax_8192": (None, AlertState.CONFIRMED, EventKind.OPENED, True),
                   "gelu": (None, AlertState.NEW, EventKind.OPENED, False),
                   "gemm": (None, AlertState.NEW, EventKind.OPENED, False)}
    assert steps[-1].comparison.case == "softmax_8192" and steps[-1].worse_pct == pytest.approx(10.0)


def test_an_open_alert_is_not_announced_again_while_it_stays_out_of_band() -> None:
    # the reference restarted at the regressed night: tonight reads UNCHANGED; the alert keeps its figure
    (step,) = plan_night([cmp("softmax_8192", Verdict.UNCHANGED, 4.4, 4.4)],
                         {("npu", "softmax_8192", "time"): alert()}, band_pct=2.0)
    assert (step.alert_id, step.to_state, step.event, step.announce) == (7, AlertState.CONFIRMED, None, False)
    assert step.change_pct == pytest.approx(10.0) and step.worse_pct is None


def test_only_a_confirmed_improvement_fixes_it_and_is_announced() -> None:
    (step,) = plan_night([cmp("softmax_8192", Verdict.IMPROVED, 4.4, 4.05)],
                         {("npu", "softmax_8192", "time"): alert()}, band_pct=2.0)
    assert (step.from_state, step.to_state, step.event, step.announce) == (
        AlertState.CONFIRMED, AlertState.FIXED, EventKind.STATE, True)
    # the step carries the verdict's own change (4.4 -> 4.05), as the report printed it
    assert step.change_pct == pytest.approx((4.05 - 4.4) / 4.4 * 100) and "±2%" in step.note
    # back in band by the numbers, but the judge has not confirmed it (a suspect improvement): no change
    (step,) = plan_night([cmp("softmax_8192", Verdict.SUSPECT_IMPROVED, 4.4, 4.05)],
                         {("npu", "softmax_8192", "time"): alert()}, band_pct=2.0)
    assert (step.to_state, step.event, step.announce) == (AlertState.CONFIRMED, None, False)
    # a confirmed improvement that leaves it still well above its reference: partly recovered, not fixed
    (step,) = plan_night([cmp("softmax_8192", Verdict.IMPROVED, 4.8, 4.4)],
                         {("npu", "softmax_8192", "time"): alert()}, band_pct=2.0)
    assert step.to_state is AlertState.CONFIRMED and "partly recovered" in step.note


def test_a_new_alert_confirms_only_when_the_judge_does_or_is_cleared_quietly() -> None:
    watch = {("npu", "softmax_8192", "time"): alert(state=AlertState.NEW)}
    # still beyond its old band, but the judge did not confirm it (A/B cleared it): cleared, never announced
    (gone,) = plan_night([cmp("softmax_8192", Verdict.UNCHANGED, 4.1, 4.1)], watch, band_pct=2.0)
    assert (gone.to_state, gone.announce) == (AlertState.CLEARED, False)
    (waiting,) = plan_night([cmp("softmax_8192", Verdict.SUSPECT, 4.1, 4.4)], watch, band_pct=2.0)
    assert (waiting.to_state, waiting.event, waiting.announce) == (AlertState.NEW, None, False)
    (yes,) = plan_night([cmp("softmax_8192", Verdict.REGRESSION, 4.0, 4.4)], watch, band_pct=2.0)
    assert (yes.to_state, yes.announce) == (AlertState.CONFIRMED, True)
    (gap,) = plan_night([cmp("softmax_8192", Verdict.INVALID, 4.0, 4.4)], watch, band_pct=2.0)
    assert (gap.to_state, gap.event) == (AlertState.NEW, None)


def test_worse_again_is_announced_unless_a_person_acked_it() -> None:
    tonight = [cmp("softmax_8192", Verdict.REGRESSION, 4.4, 4.9)]  # a further confirmed step
    (step,) = plan_night(tonight, {("npu", "softmax_8192", "time"): alert()}, band_pct=2.0)
    assert (step.to_state, step.event, step.announce) == (AlertState.CONFIRMED, EventKind.WORSENED, True)
    for quiet in (AlertState.ACKED, AlertState.EXPECTED):
        (step,) = plan_night(tonight, {("npu", "softmax_8192", "time"): alert(state=quiet)}, band_pct=2.0)
        assert (step.to_state, step.event, step.announce) == (quiet, EventKind.WORSENED, False)
    # worse by the numbers, but only a suspect: no news
    (step,) = plan_night([cmp("softmax_8192", Verdict.SUSPECT, 4.4, 4.9)],
                         {("npu", "softmax_8192", "time"): alert()}, band_pct=2.0)
    assert step.event is None and not step.announce


def test_acked_alert_still_gets_fixed() -> None:
    (step,) = plan_night([cmp("softmax_8192", Verdict.IMPROVED, 4.4, 4.0)],
                         {("npu", "softmax_8192", "time"): alert(state=AlertState.ACKED)}, band_pct=2.0)
    assert (step.from_state, step.to_state, step.announce) == (AlertState.ACKED, AlertState.FIXED, True)


def test_throughput_alerts_use_the_direction_of_the_metric() -> None:
    bw = alert(case="copy", base=900.0, lower_is_better=False)
    better = cmp("copy", Verdict.IMPROVED, 800.0, 895.0, metric="time", unit="ms", lower_is_better=False)
    (step,) = plan_night([better], {("npu", "copy", "time"): bw}, band_pct=2.0)
    assert step.to_state is AlertState.FIXED and step.worse_pct == pytest.approx(-(895 - 800) / 8)
    (step,) = plan_night([dataclasses.replace(better, head=Summary(850.0, 1),
                                              judgement=dataclasses.replace(better.judgement))],
                         {("npu", "copy", "time"): bw}, band_pct=2.0)
    assert step.to_state is AlertState.CONFIRMED   # 850 is still 5.6% below its 900 reference


def test_done_series_and_series_without_a_value_are_skipped() -> None:
    comparisons = [cmp("softmax_8192", Verdict.REGRESSION, 4.0, 4.4), cmp("gone", Verdict.MISSING, 4.0, None),
                   cmp("crashed", Verdict.FAILED, 4.0, None)]
    assert plan_night(comparisons, {("npu", "gone", "time"): alert(case="gone")},
                      done={("npu", "softmax_8192", "time")}, band_pct=2.0) == []


def test_history_in_another_unit_is_converted() -> None:
    (step,) = plan_night([cmp("softmax_8192", Verdict.IMPROVED, 4400.0, 4050.0, unit="us")],
                         {("npu", "softmax_8192", "time"): alert()}, band_pct=2.0)
    assert step.to_state is AlertState.FIXED   # 4050 us is within 2% of the 4.0 ms reference


def test_people_set_only_their_states_on_open_alerts() -> None:
    check_human_transition(alert(), AlertState.ACKED)
    check_human_transition(alert(state=AlertState.ACKED), AlertState.WONTFIX)
    with pytest.raises(AlertError, match="set by the nightly"):
        check_human_transition(alert(), AlertState.FIXED)
    with pytest.raises(AlertError, match="already closed"):
        check_human_transition(alert(state=AlertState.FIXED), AlertState.ACKED)
    with pytest.raises(AlertError, match="already acked"):
        check_human_transition(alert(state=AlertState.ACKED), AlertState.ACKED)


def test_clusters_group_by_range_family_and_pool() -> None:
    a = [alert(case="softmax/float16/(64x64)"), alert(case="softmax/float32/(64x64)"),
         alert(case="softmax_8192", pool="cuda"), alert(case="layer_norm_1024")]
    groups = clusters([(x, None) for x in a])
    assert sorted((k, len(v)) for k, v in groups.items()) == [
        (("1111111..2222222", "layer_norm", "npu"), 1), (("1111111..2222222", "softmax", "cuda"), 1),
        (("1111111..2222222", "softmax", "npu"), 2)]


def test_a_new_alert_is_cleared_when_its_series_turns_unmeasurable_with_the_reason() -> None:
    """docs/alerts.md: a `new` alert the judge judges and does not flag closes; unmeasurable (its noise hides
    the change it waits for) is such a night (issue 22 saw 28 left open)."""
    watch = {("npu", "softmax_8192", "time"): alert(state=AlertState.NEW)}
    row = cmp("softmax_8192", Verdict.UNMEASURABLE, 4.0, 4.3)
    row = dataclasses.replace(row, judgement=dataclasses.replace(row.judgement,
                                                                 note="bimodal 4.0/4.4: unmeasurable at 2%"))
    (gone,) = plan_night([row], watch, band_pct=2.0)
    assert (gone.to_state, gone.event, gone.announce) == (AlertState.CLEARED, EventKind.STATE, False)
    assert "unmeasurable" in gone.note and "bimodal 4.0/4.4" in gone.note
    # run again at the same night (a retry): the series is done, nothing is planned twice
    assert plan_night([row], watch, done={("npu", "softmax_8192", "time")}, band_pct=2.0) == []
    # a confirmed alert is not closed by noise: only the judge's confirmed improvement fixes it
    (kept,) = plan_night([row], {("npu", "softmax_8192", "time"): alert()}, band_pct=2.0)
    assert kept.to_state is AlertState.CONFIRMED and kept.event is None


def test_change_range_is_never_empty_and_prefers_where_the_change_was_first_seen() -> None:
    from zlops.alerts.lifecycle import change_range, previous_commit, series_ranges

    prev = "0" * 40
    assert change_range(HEAD_SHA, HEAD_SHA, prev) == "0000000..2222222"   # baseline = tonight's own commit
    assert change_range(BASE_SHA, HEAD_SHA, prev) == "1111111..2222222"
    assert change_range(HEAD_SHA, HEAD_SHA) == "2222222..2222222"          # nothing better known
    t = [datetime(2026, 3, d, tzinfo=timezone.utc) for d in (1, 2, 3, 4)]
    accepted = [(prev, t[0]), (BASE_SHA, t[1]), (HEAD_SHA, t[2]), ("3" * 40, t[3])]
    assert previous_commit(accepted, head_sha=HEAD_SHA, before=t[3]) == BASE_SHA
    assert previous_commit(accepted, head_sha=HEAD_SHA, before=t[3], ancestors={prev, HEAD_SHA}) == prev
    same = dataclasses.replace(cmp("softmax_8192", Verdict.REGRESSION, 4.0, 4.4),
                               base=BaselinePoint("n1", HEAD_SHA, "ms", 4.0, 1))
    other = cmp("gelu", Verdict.REGRESSION, 4.0, 4.4)
    ranges = series_ranges([same, other], HEAD_SHA, previous_sha=BASE_SHA,
                           alerts={("npu", "gelu", "time"): "0000000..1111111"})
    assert ranges == {("npu", "softmax_8192", "time"): "1111111..2222222", ("npu", "gelu", "time"): "0000000..1111111"}


def test_a_companion_timing_folds_into_the_alert_of_the_timing_it_accompanies() -> None:
    """One alert per regressed case (issue 22): the collectives' ``wall_s`` (the round's wall time around
    ``execute_s``) confirmed on the night ``execute_s`` is confirmed opens no alert of its own (run 6b of the gloo
    campaign opened two for one case); the execute_s alert's event names it. Where only the host's work around the
    collective got slower, or the companion is firmer than the other clock's alert, it alerts on its own."""
    case = "allreduce_p2_count262144_fp32/nccl"
    both = plan_night([cmp(case, Verdict.SEVERE, 10.0, 16.1, metric="execute_s", unit="s"),
                       cmp(case, Verdict.SEVERE, 11.0, 19.15, metric="wall_s", unit="s")], {}, band_pct=2.0)
    assert [(s.comparison.metric, s.to_state, s.announce) for s in both] == [("execute_s", AlertState.CONFIRMED,
                                                                             True)]
    assert "with wall_s +74.09% (severe), the same work's other clock: no alert of its own" in both[0].note
    # the host's work alone: wall_s alerts on its own
    alone = plan_night([cmp(case, Verdict.UNCHANGED, 10.0, 10.0, metric="execute_s", unit="s"),
                        cmp(case, Verdict.SEVERE, 11.0, 19.15, metric="wall_s", unit="s")], {}, band_pct=2.0)
    assert [(s.comparison.metric, s.to_state) for s in alone] == [("wall_s", AlertState.CONFIRMED)]
    # execute_s only a suspect tonight: the confirmed wall_s is firmer and opens its own alert
    firmer = plan_night([cmp(case, Verdict.SUSPECT, 10.0, 10.5, metric="execute_s", unit="s"),
                         cmp(case, Verdict.REGRESSION, 11.0, 12.0, metric="wall_s", unit="s")], {}, band_pct=2.0)
    assert sorted((s.comparison.metric, s.to_state) for s in firmer) == [("execute_s", AlertState.NEW),
                                                                        ("wall_s", AlertState.CONFIRMED)]
    # execute_s' alert already open and confirmed (a quiet night for it): wall_s confirmed later opens nothing
    held = dataclasses.replace(alert(case), metric="execute_s", unit="s", base_value=10.0)
    later = plan_night([cmp(case, Verdict.SEVERE, 10.0, 16.1, metric="execute_s", unit="s"),
                        cmp(case, Verdict.SEVERE, 11.0, 19.15, metric="wall_s", unit="s")],
                       {held.key: held}, band_pct=2.0)
    assert [s.comparison.metric for s in later] == ["execute_s"] and later[0].alert_id == held.id
    # a metric that is no companion (the one-time set-up) keeps its own alert
    apart = plan_night([cmp(case, Verdict.SUSPECT, 10.0, 10.4, metric="execute_s", unit="s"),
                        cmp(case, Verdict.SUSPECT, 11.0, 11.5, metric="setup_s", unit="s")], {}, band_pct=2.0)
    assert len(apart) == 2


def test_the_steps_word_a_throughput_change_as_the_report_does() -> None:
    """The notes use zlops.model.change_text: a throughput still below its reference after a partial
    recovery is "-20.00% (worse by 25.0%)", never a bare "+25.00% worse" beside a -20% change."""
    tput = {("npu", "softmax_8192", "time"): alert(base=100.0, lower_is_better=False)}
    (step,) = plan_night([cmp("softmax_8192", Verdict.IMPROVED, 60.0, 80.0, lower_is_better=False)], tput,
                         band_pct=2.0)
    assert "still -20.00% (worse by 25.0%) against its reference" in step.note
    (step,) = plan_night([cmp("softmax_8192", Verdict.REGRESSION, 80.0, 60.0, lower_is_better=False)], tput,
                         band_pct=2.0)
    assert step.event is EventKind.WORSENED and step.note.endswith(": -25.00% (worse by 25.0%)")
