"""Coverage (zlops.judge.coverage): the share of a night's series watched at the two thresholds and why each other
one is not, on hand-made compare rows; the one figure the report, the Slack summary, the run meta (the next
night's fall), the coverage page and the trust ledger print."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from zlops.judge import coverage as cover
from zlops.judge.coverage import AB, NIGHTS, AtThreshold, Coverage, row_watch
from zlops.judge.judges import AB_NOISE_K
from zlops.model import (
    CANARY_MARK,
    BaselinePoint,
    CompareSummary,
    Comparison,
    Figures,
    Judgement,
    RunRecord,
    RunStatus,
    Summary,
    Thresholds,
    Verdict,
)
from zlops.report.html import html_report
from zlops.report.markdown import markdown_report
from zlops.slack.summary import slack_summary_messages
from zlops.store import Store
from zlops.triage.trust import compute_ledger, ledger, ledger_lines

SHA = "3" * 40
T0 = datetime(2026, 12, 1, 2, 0, tzinfo=timezone.utc)
T = Thresholds(potential_pct=2.0, regression_pct=5.0)


def row(case: str, verdict: Verdict, threshold: float | None = 2.0, *, note: str = "noise 0.50% over 9 nights",
        pool: str = "cuda", modes: tuple[float, ...] = (), ab_noise: float | None = None,
        runs_head: tuple[float, ...] = (), follows: str = "", figures: bool = True, metric: str = "latency"
        ) -> Comparison:
    f = Figures(reference=1.0, reference_label="median of 9 nights", value=1.01, value_label="tonight, 5 samples",
                unit="ms", threshold_pct=threshold, modes=modes, runs_base=(1.0,) * len(runs_head),
                runs_head=runs_head, follows=follows, ab_noise_pct=ab_noise) if figures else None
    return Comparison("kernels", pool, case, metric, "ms", True, BaselinePoint("n0", SHA, "ms", 1.0, 5),
                      Summary(1.01, 5) if verdict is not Verdict.MISSING else None,
                      Judgement(verdict, 1.0, 1.0, threshold, note, f))


def test_each_row_is_watched_by_the_nights_through_the_ab_or_not_for_one_reason() -> None:
    quiet = row("quiet", Verdict.UNCHANGED, 2.0)
    mid = row("mid", Verdict.UNCHANGED, 3.5)
    assert [row_watch(quiet, 2.0), row_watch(quiet, 5.0)] == [NIGHTS, NIGHTS]
    assert [row_watch(mid, 2.0), row_watch(mid, 5.0)] == ["noise", NIGHTS]
    # every judged verdict counts by its threshold, a suspect of either way too
    for v in (Verdict.SUSPECT, Verdict.SUSPECT_IMPROVED, Verdict.REGRESSION, Verdict.SEVERE, Verdict.IMPROVED,
              Verdict.POTENTIAL):
        assert row_watch(row("x", v, 4.0), 5.0) == NIGHTS and row_watch(row("x", v, 4.0), 2.0) == "noise"
    # process levels: never watched by the nights, whatever the threshold
    assert row_watch(row("lv", Verdict.UNCHANGED, 2.0, modes=(0.02, 0.04)), 5.0) == "levels"
    assert row_watch(row("lv", Verdict.UNMEASURABLE, 9.0, modes=(0.02, 0.04), ab_noise=0.1), 5.0) == "levels"
    # too few nights: the noise model is provisional, whatever threshold it reads (its noise is not known yet: a
    # replayed hold-out read 100% watched on its second and third nights, then 50-57% once the noise was known)
    young = row("young", Verdict.UNCHANGED, 3.0, note="+0.4% worse; threshold 3.00% (provisional: 2 nights < 5)")
    assert [row_watch(young, 2.0), row_watch(young, 5.0)] == ["too few nights", "too few nights"]
    floor = row("floor", Verdict.UNCHANGED, 2.0, note="+0.4% worse; threshold 2.00% (provisional: 2 nights < 5)")
    assert [row_watch(floor, 2.0), row_watch(floor, 5.0)] == ["too few nights", "too few nights"]
    # noise the nights cannot see through; an A/B whose own noise is small can (3 x sigma <= X)
    noisy = row("noisy", Verdict.UNMEASURABLE, 9.0)
    assert [row_watch(noisy, 2.0), row_watch(noisy, 5.0)] == ["noise", "noise"]
    assert AB_NOISE_K == 3.0
    ab_quiet = row("abq", Verdict.UNMEASURABLE, 9.0, ab_noise=0.5)           # 1.5% <= 2%
    ab_mid = row("abm", Verdict.UNCHANGED, 9.0, ab_noise=1.0)                # 3% <= 5%, > 2%
    ab_loud = row("abl", Verdict.UNMEASURABLE, 9.0, ab_noise=4.0)            # 12% > 5%
    assert [row_watch(ab_quiet, 2.0), row_watch(ab_quiet, 5.0)] == [AB, AB]
    assert [row_watch(ab_mid, 2.0), row_watch(ab_mid, 5.0)] == ["noise (A/B too)", AB]
    assert [row_watch(ab_loud, 2.0), row_watch(ab_loud, 5.0)] == ["noise (A/B too)", "noise (A/B too)"]
    # tonight's A/B decided it: watched through the A/B though the nights' threshold was wide
    decided = row("dec", Verdict.REGRESSION, 8.0, runs_head=(1.1, 1.1, 1.1, 1.1, 1.1))
    cleared = row("clr", Verdict.UNCHANGED, 8.0, runs_head=(1.0, 1.0, 1.0, 1.0, 1.0))
    undecided = row("und", Verdict.SUSPECT, 8.0, runs_head=(1.1, 0.9, 1.1, 0.9, 1.0))
    assert [row_watch(decided, 2.0), row_watch(cleared, 5.0), row_watch(undecided, 5.0)] == [AB, AB, "noise"]
    # asked against the floor, the A/B's verdict carries the floor as its threshold: still the A/B's, not the nights'
    floor = row("flr", Verdict.UNCHANGED, 2.0, runs_head=(1.0, 1.0, 1.0, 1.0, 1.0))
    assert [row_watch(floor, 2.0), row_watch(row("flr", Verdict.SUSPECT, 2.0, runs_head=(1.1, 0.9)), 2.0)] == [
        AB, NIGHTS]
    # the gaps, each its own reason, before anything else
    for v, why in ((Verdict.INVALID, "invalid"), (Verdict.MISSING, "missing"), (Verdict.FAILED, "failed"),
                   (Verdict.INCOMPARABLE, "incomparable")):
        assert row_watch(row("gap", v, None, figures=False, note=f"{why} tonight"), 5.0) == why
        assert row_watch(row("gap", v, 2.0, ab_noise=0.1, note=""), 2.0) == why
    # the simple judge's thresholds are fixed: its regression's threshold_pct (5%) is the class it crossed
    simple = row("s", Verdict.REGRESSION, 5.0)
    assert [row_watch(simple, 2.0, judge="simple"), row_watch(simple, 2.0)] == [NIGHTS, "noise"]
    assert row_watch(row("s", Verdict.UNMEASURABLE, 9.0), 2.0, judge="simple") == "noise"
    # an A/B's own finding with no threshold above X (its base runs on levels): unmeasurable otherwise
    assert row_watch(row("odd", Verdict.UNMEASURABLE, 2.0, note="unmeasurable at 2%; suspect not confirmed"),
                     5.0) == "unmeasurable"


def test_new_canary_and_derived_rows_are_not_counted() -> None:
    rows = [row("a", Verdict.UNCHANGED, 2.0), row("b", Verdict.NEW, None, figures=False, note=""),
            row("a" + CANARY_MARK, Verdict.UNMEASURABLE, 9.0),
            row("a", Verdict.UNCHANGED, 2.0, follows="latency", metric="speedup"),
            row("c", Verdict.MISSING, None, figures=False, note="follows latency (1 / x)", metric="speedup")]
    assert [cover.counted(c) for c in rows] == [True, False, False, False, False]
    (c,) = cover.pool_coverage(rows, T)
    assert (c.total, c.high.watched, c.low.watched, c.derived, c.new) == (1, 1, 1, 2, 1)


NIGHT = [row("q1", Verdict.UNCHANGED, 2.0), row("q2", Verdict.SUSPECT, 2.0), row("m", Verdict.UNCHANGED, 4.0),
         row("ab", Verdict.UNMEASURABLE, 9.0, ab_noise=1.0), row("lv", Verdict.UNMEASURABLE, 2.0, modes=(1.0, 2.0)),
         row("n1", Verdict.UNMEASURABLE, 9.0), row("n2", Verdict.UNMEASURABLE, 12.0, ab_noise=3.0),
         row("y", Verdict.UNCHANGED, 6.0, note="provisional: 1 nights < 5, noise 2.00%"),
         row("i", Verdict.INVALID, None, figures=False, note="throttled"),
         row("npu1", Verdict.UNCHANGED, 2.0, pool="npu"), row("new", Verdict.NEW, None, figures=False, note="")]


def test_a_pools_figure_and_its_line() -> None:
    cuda, npu = cover.pool_coverage(NIGHT, T)
    assert (cuda.pool, cuda.total, cuda.derived, cuda.new) == ("cuda", 9, 0, 1)
    assert cuda.high == AtThreshold(5.0, 4, 1, {"invalid": 1, "levels": 1, "too few nights": 1,
                                                "noise (A/B too)": 1, "noise": 1})
    assert cuda.low == AtThreshold(2.0, 2, 0, {"invalid": 1, "levels": 1, "too few nights": 1,
                                               "noise (A/B too)": 2, "noise": 2})
    assert cover.coverage_line(cuda) == ("coverage: 4/9 watched at 5% (44%; 1 through the A/B), 2/9 at 2% (22%); "
                                         "not at 5%: invalid 1, levels 1, too few nights 1, noise (A/B too) 1, noise 1")
    assert cover.coverage_line(npu) == "coverage: 1/1 watched at 5% (100%), 1/1 at 2% (100%)"
    # the thresholds are the config's, not 2 and 5
    wide = cover.pool_coverage(NIGHT, Thresholds(potential_pct=4.0, regression_pct=9.0))[0]
    assert (wide.low.pct, wide.high.pct, wide.low.watched, wide.high.watched) == (4.0, 9.0, 4, 5)
    big = Coverage("s", "p", 1000, AtThreshold(2.0, 2), AtThreshold(5.0, 996, 0, {"noise": 4}))
    assert cover.coverage_line(big) == ("coverage: 996/1000 watched at 5% (99.6%), 2/1000 at 2% (0.2%); "
                                        "not at 5%: noise 4")
    assert cover.coverage_line(Coverage("s", "p", 0, AtThreshold(2, 0), AtThreshold(5, 0), new=3)) == \
        "coverage: no series to watch (3 new without a baseline)"


def _cov(watched: int, total: int, **why: int) -> Coverage:
    """A cuda night watched ``watched`` of ``total`` at 5% (half that at 2%); ``why``: reasons at 5%."""
    return Coverage("kernels", "cuda", total, AtThreshold(2.0, watched // 2),
                    AtThreshold(5.0, watched, 0, {r: why[r] for r in cover.REASONS if why.get(r)}))


def test_a_fall_of_more_than_five_points_at_the_upper_threshold_is_said() -> None:
    before, now = _cov(41, 50, noise=5, levels=4), _cov(30, 49, noise=17, levels=2)
    assert cover.drop_line(now, before) == "coverage fell: 82% -> 61% at 5%: 12 series to noise"
    two = _cov(30, 49, noise=14, levels=5)
    assert cover.drop_line(two, before) == "coverage fell: 82% -> 61% at 5%: 9 series to noise, 1 to levels"
    assert cover.drop_line(_cov(39, 50, noise=7, levels=4), before) is None      # 4 points: not said
    assert cover.drop_line(now, None) is None
    other = Coverage("kernels", "cuda", 50, AtThreshold(3.0, 20), AtThreshold(7.5, 41))
    assert cover.drop_line(now, other) is None                                    # other thresholds: no comparison
    # the report's lines and the Slack summary's one line say it
    assert cover.pool_lines([now], {"cuda": before}) == [
        f"cuda: {cover.coverage_line(now)}", "cuda: coverage fell: 82% -> 61% at 5%: 12 series to noise"]
    assert cover.night_line([now], {"cuda": before}) == (
        f"cuda: {cover.coverage_line(now)} · cuda: coverage fell: 82% -> 61% at 5%: 12 series to noise")


def test_the_run_meta_round_trip_and_the_previous_night_per_pool() -> None:
    night = cover.pool_coverage(NIGHT, T)
    meta = cover.to_meta(night)
    assert cover.from_meta(meta, "kernels") == night
    assert cover.from_meta({"schema_version": 99, "pools": {}}) == [] and cover.from_meta(None) == []
    older = {cover.META_KEY: cover.to_meta([_cov(10, 10)])}
    newer = {cover.META_KEY: cover.to_meta(night[1:])}          # npu only
    assert cover.previous([newer, {"other": 1}, older], "kernels") == {"npu": night[1], "cuda": _cov(10, 10)}


def test_the_report_and_the_slack_summary_state_the_coverage() -> None:
    run = RunRecord("n2", "nightly", "kernels", SHA, "main", RunStatus.DONE)
    summary = CompareSummary("n2", "kernels", SHA, tuple(NIGHT))
    before = {"cuda": _cov(9, 9)}
    night = cover.pool_coverage(NIGHT, T)
    lines = cover.pool_lines(night, before)
    md = markdown_report(summary, run=run, shards=[], coverage=lines)
    assert ("## Coverage\n\n- cuda: coverage: 4/9 watched at 5% (44%; 1 through the A/B), 2/9 at 2% (22%); "
            "not at 5%: invalid 1, levels 1, too few nights 1, noise (A/B too) 1, noise 1\n"
            "- cuda: coverage fell: 100% -> 44% at 5%: 1 series to invalid, 1 to levels, 1 to too few nights, "
            "1 to noise (A/B too), 1 to noise\n"
            "- npu: coverage: 1/1 watched at 5% (100%), 1/1 at 2% (100%)\n") in md
    page = html_report(summary, run=run, shards=[], coverage=lines)
    assert '<h2>Coverage</h2>\n<ul id="coverage">\n<li>cuda: coverage: 4/9 watched at 5%' in page
    assert "<li>cuda: coverage fell: 100% -&gt; 44% at 5%" in page
    one = cover.night_line(night, before)
    assert one == ("2 pools: coverage: 5/10 watched at 5% (50%; 1 through the A/B), 3/10 at 2% (30%); not at 5%: "
                   "invalid 1, levels 1, too few nights 1, noise (A/B too) 1, noise 1 · cuda: coverage fell: "
                   "100% -> 44% at 5%: 1 series to invalid, 1 to levels, 1 to too few nights, 1 to noise (A/B too), "
                   "1 to noise")
    main = slack_summary_messages(summary, run=run, shards=[], channel="C0PERF", coverage=one).main
    counts = main["blocks"][2]["text"]["text"]
    assert counts.startswith("*Overall:") and counts.endswith(
        "\n:telescope: 2 pools: coverage: 5/10 watched at 5% (50%; 1 through the A/B), 3/10 at 2% (30%); not at 5%: "
        "invalid 1, levels 1, too few nights 1, noise (A/B too) 1, noise 1 · cuda: coverage fell: 100% -&gt; 44% at "
        "5%: 1 series to invalid, 1 to levels, 1 to too few nights, 1 to noise (A/B too), 1 to noise")


def test_the_report_step_stores_the_figure_and_compares_with_the_previous_night(tmp_path: Path) -> None:
    from zlops.steps.report import run_coverage

    store = Store.open(f"sqlite:///{tmp_path / 'z.db'}")
    good = [row(f"q{i}", Verdict.UNCHANGED, 2.0) for i in range(10)]
    bad = good[:6] + [row(f"q{i}", Verdict.UNMEASURABLE, 9.0) for i in range(6, 10)]
    runs = []
    for n, rows in enumerate((good, bad)):
        run = RunRecord(f"n{n}", "nightly", "kernels", SHA, "main", RunStatus.DONE, started_at=T0 + timedelta(days=n))
        store.upsert_run(run)
        store.save_comparisons(run.run_key, rows)
        runs.append(run)
    night, before = run_coverage(store, runs[0], store.comparisons("n0"), T, save=True)
    assert before == {} and cover.pool_lines(night, before) == ["cuda: coverage: 10/10 watched at 5% (100%), "
                                                                "10/10 at 2% (100%)"]
    night, before = run_coverage(store, store.get_run("n1"), store.comparisons("n1"), T, save=True)
    assert cover.pool_lines(night, before)[1] == "cuda: coverage fell: 100% -> 60% at 5%: 4 series to noise"
    assert cover.from_meta(store.get_run("n1").meta[cover.META_KEY], "kernels") == night
    # a re-render reads the night before it, never a later one, and stores nothing
    again, before = run_coverage(store, store.get_run("n0"), store.comparisons("n0"), T, save=False)
    assert before == {} and again == cover.from_meta(store.get_run("n0").meta[cover.META_KEY], "kernels")
    # the ledger adds the stored nights up: one read, the two shares and the reasons
    led = ledger(store, days=3, until=T0 + timedelta(days=2))
    assert (led.nights, led.coverage_nights) == (2, 2)
    assert ("Coverage over the series-nights of all 2 nightly run(s): 16/20 watched at 5% (80%), 16/20 at 2% (80%); "
            "not at 5%: noise 4") in ledger_lines(led)
    assert ledger_lines(led)[-1].startswith("Recall (canaries)")


def test_the_ledger_says_nights_without_a_stored_figure() -> None:
    kw = {"since": T0, "until": T0 + timedelta(days=7)}
    none = compute_ledger([], [], nights=3, **kw)
    assert "Coverage: — (none of the 3 nightly run(s) of the window recorded its coverage)" in ledger_lines(none)
    meta = cover.to_meta([_cov(41, 50, noise=5, levels=4)])
    other = cover.to_meta([Coverage("kernels", "npu", 10, AtThreshold(3.0, 5), AtThreshold(7.5, 9, 2))])
    led = compute_ledger([], [], nights=4, coverage=[meta, meta, other], **kw)   # one night stored none
    assert [c.total for c in led.coverage] == [100, 10]
    assert ledger_lines(led)[-3:-1] == [
        "Coverage over the series-nights of 3 of 4 nightly run(s) that recorded it: 82/100 watched at 5% (82%), "
        "40/100 at 2% (40%); not at 5%: levels 8, noise 10",
        "Coverage over the series-nights of 3 of 4 nightly run(s) that recorded it: 9/10 watched at 7.5% (90%; 2 "
        "through the A/B), 5/10 at 3% (50%)"]


@pytest.mark.parametrize("pct", [2.0, 5.0])
def test_every_reason_is_a_known_one(pct: float) -> None:
    assert {row_watch(c, pct) for c in NIGHT if cover.counted(c)} <= {NIGHTS, AB, *cover.REASONS}


def test_a_case_whose_graph_timer_fell_back_says_so_and_coverage_names_it() -> None:
    """zlops.timing times a shape directly when the device refuses its capture (params["fallback"]): the compare
    row says so beside its verdict, and a row that is then too noisy to watch is 'timer fell back', not 'noise';
    the same noisy series timed by the graph says 'noise'."""
    from zlops.formats.zlops_json import parse
    from zlops.judge.compare import JudgeInputs, build_comparisons
    from zlops.judge.setup import JudgingSetup
    from zlops.model import TIMER_FELL_BACK
    from zlops.stats import Policy
    from zlops.timing import Timing

    why = "capture refused: RuntimeError: operation not permitted when stream is capturing"
    doc = {"schema_version": 1, "cases": [
        {"name": name, "metric": "time", "unit": "ms", "samples": [1.0, 1.01, 0.99],
         "params": Timing(name, (1.0,), timer, fallback).params()}
        for name, timer, fallback in (("sort", "direct", why), ("tanh", "graph", None))]}
    head = {("cuda", r.case, r.metric): r for r in parse(json.dumps(doc), source="results.json")}
    noisy = [1.0, 1.06, 0.95, 1.04, 0.97, 1.05, 0.94, 1.03, 0.96]   # ~4% between nights: a 5% change hides
    bases = {k: BaselinePoint("n9", SHA, "ms", 1.0, 3) for k in head}
    rows = build_comparisons(suite="kernels", pools=["cuda"], head=head, baselines=bases,
                             newest_baseline_run={"cuda": "n9"}, setup=JudgingSetup("noise", T, Policy()),
                             inputs=JudgeInputs(history={k: noisy for k in head}))
    by = {c.case: c for c in rows}
    assert f"{TIMER_FELL_BACK}: {why}" in by["sort"].judgement.note
    assert TIMER_FELL_BACK not in by["tanh"].judgement.note
    assert by["sort"].judgement.threshold_pct > 5.0 and by["tanh"].judgement.threshold_pct > 5.0
    assert row_watch(by["sort"], 5.0) == "timer fell back"
    assert row_watch(by["tanh"], 5.0) in ("noise", "unmeasurable")
    [night] = cover.pool_coverage(rows, T)
    assert night.high.why.get("timer fell back") == 1
