"""Recall canaries (zlops.judge.canary): the schedule, the one scaling function, planting, the episodes and
recall the ledger prints, the config's sentences, and that a canary row never opens an alert."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from zlops.config.settings import parse_config
from zlops.errors import ConfigError
from zlops.judge import canary
from zlops.model import (
    BaselinePoint,
    CaseResult,
    Comparison,
    Figures,
    Judgement,
    Summary,
    Verdict,
    canary_case,
    canary_source,
    is_canary,
    worse_pct,
)
from zlops.triage.trust import compute_ledger, ledger_lines

T0 = datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)


# --- the schedule and the scaling ---------------------------------------------------------------

def test_the_schedule_plants_hold_nights_every_n_after_a_first_history() -> None:
    nights = [canary.schedule(n, every_nights=4, hold_nights=2, slowdown_pct=5) for n in range(13)]
    assert [n.active for n in nights] == [False] * 4 + [True, True, False, False] * 2 + [True]
    assert [n.episode for n in nights if n.active] == [4, 4, 8, 8, 12]
    assert {n.pct for n in nights if n.active} == {5.0} and {n.pct for n in nights if not n.active} == {0.0}
    # a pure function of the clock: the same night gets the same answer, and it survives the run's meta
    again = canary.schedule(9, every_nights=4, hold_nights=2, slowdown_pct=5)
    assert again == nights[9] and canary.CanaryNight.from_meta(again.to_meta()) == again
    assert canary.CanaryNight.from_meta(None) is None and canary.CanaryNight.from_meta({}) is None
    with pytest.raises(ValueError, match="hold_nights"):
        canary.schedule(3, every_nights=4, hold_nights=4, slowdown_pct=5)


@pytest.mark.parametrize("lower_is_better", [True, False])
def test_scaling_makes_the_series_exactly_pct_worse_either_direction(lower_is_better: bool) -> None:
    samples = (1.0, 2.0, 4.0)
    slower = canary.scale(samples, 5.0, lower_is_better=lower_is_better)
    for before, after in zip(samples, slower, strict=True):
        assert worse_pct(before, after, lower_is_better=lower_is_better) == pytest.approx(5.0)
    assert canary.scale(samples, 0.0, lower_is_better=lower_is_better) == samples   # a quiet night: a copy
    assert samples == (1.0, 2.0, 4.0)   # the input is never touched


def test_planting_copies_the_source_case_and_selects_it_for_an_ab() -> None:
    results = [CaseResult("add", "latency", "ms", True, (1.0, 1.1)),
               CaseResult("add", "tflops", "TFLOPS", False, (2.0,)), CaseResult("mul", "latency", "ms", True, (3.0,))]
    active = canary.schedule(4, every_nights=4, hold_nights=1, slowdown_pct=10)
    planted = canary.plant(results, "add", None, active)
    assert [(r.case, r.metric) for r in planted] == [("add [canary]", "latency"), ("add [canary]", "tflops")]
    assert planted[0].samples == pytest.approx((1.1, 1.21)) and planted[1].samples == pytest.approx((2.0 / 1.1,))
    assert planted[0].params == {"canary_of": "add", "planted_pct": 10.0}
    assert [r.metric for r in canary.plant(results, "add", "tflops", active)] == ["tflops"]
    assert canary.plant(results, "sub", None, active) == []
    assert is_canary(canary_case("add")) and canary_source(canary_case("add")) == "add" and not is_canary("add")
    # an A/B of the canary (and of its source beside it) measures the source once
    assert canary.measured_cases(("add [canary]", "add", "mul")) == ("add", "mul")
    assert canary.measured_cases(None) is None


def test_a_paired_night_gives_the_canary_its_sources_pairs_the_head_scaled() -> None:
    pairs = [["add", "latency", [1.0, 1.0], [1.0, 1.01]], ["mul", "latency", [2.0], [2.0]],
             ["add [canary]", "latency", [9.0], [9.0]]]   # a stale canary from an earlier call: replaced
    active = canary.schedule(4, every_nights=4, hold_nights=1, slowdown_pct=10)
    out = canary.plant_pairs(pairs, "add", None, active, {"latency": True})
    assert out[:2] == pairs[:2] and out[2][:3] == ["add [canary]", "latency", [1.0, 1.0]]
    assert out[2][3] == pytest.approx([1.1, 1.111])
    assert canary.plant_pairs(out, "add", None, active, {"latency": True}) == out   # idempotent


def test_a_flaggems_selection_of_a_canary_runs_its_sources_op() -> None:
    from zlops.run.selection import cases_value

    suite = _config({"case": "abs/float16/(4096x4096)"}, select={"token": "^([^/]+)/", "join": " or "},
                    command=["pytest", "-m", "{cases}", "{results}"]).suites["s"]
    wanted = canary.measured_cases(("abs/float16/(4096x4096) [canary]", "exp/float16/(64x64)"))
    assert wanted == ("abs/float16/(4096x4096)", "exp/float16/(64x64)")
    assert cases_value(suite, wanted) == "abs or exp"


class _Ctx:
    def __init__(self, run_key: str, meta: dict[str, Any]) -> None:
        from types import SimpleNamespace

        self.run_key = run_key
        self.suite = SimpleNamespace(canary=SimpleNamespace(case="add", metric=None, enabled=True))
        self.store = SimpleNamespace(get_run=lambda key: SimpleNamespace(meta=meta))


def test_an_ab_plants_the_head_side_only_on_a_planted_night() -> None:
    results = [CaseResult("add", "latency", "ms", True, (2.0,))]
    active = _Ctx("nightly:s:n4", {"canary": canary.schedule(4, every_nights=4, hold_nights=1,
                                                             slowdown_pct=10).to_meta()})
    base = _Ctx("nightly:s:n4:ab-base", {})
    head = {(r.case, r.metric): r.median for r in canary.ab_results(active, active, results)}
    other = {(r.case, r.metric): r.median for r in canary.ab_results(active, base, results)}
    assert head[("add [canary]", "latency")] == pytest.approx(2.2) and other[("add [canary]", "latency")] == 2.0
    quiet = _Ctx("nightly:s:n5", {"canary": canary.schedule(5, every_nights=4, hold_nights=1,
                                                            slowdown_pct=10).to_meta()})
    assert canary.ab_results(quiet, quiet, results)[-1].samples == (2.0,)
    assert canary.ab_results(_Ctx("bisect:x", {}), base, results) == results   # no canary night: untouched


# --- episodes, recall, the ledger ---------------------------------------------------------------

def _n(night: int, *, every: int = 4, hold: int = 2, verdict: str | None = "unchanged", source: str = "unchanged",
       how: str | None = None, pool: str = "npu") -> dict[str, Any]:
    state = canary.schedule(night, every_nights=every, hold_nights=hold, slowdown_pct=5)
    return {"suite": "ops", "pool": pool, "case": "add [canary]", "metric": "latency", "source_case": "add",
            "night": night, "active": state.active, "episode": state.episode, "planted_pct": state.pct,
            "at": T0 + timedelta(days=night), "verdict": verdict, "source_verdict": source, "change_pct": None,
            "how": how}


def test_episodes_confirmed_missed_and_open() -> None:
    nights = [_n(i) for i in range(4)] + [
        _n(4, verdict="suspect"), _n(5, verdict="severe", how="A/B"),    # episode 4: confirmed a night later
        _n(6, verdict="suspect_improved"), _n(7, verdict="improved"),     # its removal seen: no false alarm
        _n(8, verdict="suspect"), _n(9, verdict="suspect"), _n(10),       # episode 8: ended unconfirmed
        _n(11, verdict="regression", source="unchanged"),                 # a quiet night flagged: a false alarm
        _n(12, verdict="suspect")]                                        # episode 12: still planted
    found = canary.episodes(list(reversed(nights)))   # any order
    assert [(e.start, e.state, e.confirmed_night, e.how) for e in found] == [
        (4, "confirmed", 5, "A/B"), (8, "missed", None, None), (12, "open", None, None)]
    assert found[0].nights_to_confirm == 1
    rec = canary.recall_of(nights)
    assert (rec.count("confirmed"), rec.count("missed"), rec.count("open"), rec.recall) == (1, 1, 1, 0.5)
    assert rec.median_nights_to_confirm == 1.0
    assert (rec.false_alarms, rec.quiet_nights) == (1, 8)
    # a quiet night flagged together with its source is the source's change, not the canary's false alarm
    assert canary.recall_of([_n(3, verdict="severe", source="severe")]).false_alarms == 0
    # a window that holds only an episode's later nights does not count that episode
    assert canary.recall_of(nights[5:]).count("confirmed") == 0


def test_the_ledger_prints_recall_beside_the_false_alarms() -> None:
    nights = [_n(i) for i in range(4)] + [_n(4, verdict="severe", how="A/B"), _n(5), _n(6), _n(7),
                                          _n(8, verdict="suspect"), _n(9, verdict="suspect"), _n(10)]
    led = compute_ledger([], [], since=T0, until=T0 + timedelta(days=30), suite="ops", canary_nights=nights)
    assert led.canary.recall == 0.5
    line = ledger_lines(led)[-1]
    assert line == ("Recall (canaries): 50% = 1 of 2 planted slowdown(s) (+5%) confirmed, 1 missed, median 0 "
                    "night(s) from planting to confirmation; false alarms on quiet canary nights: 0 of 7")
    # nights outside the window are not the ledger's
    later = compute_ledger([], [], since=T0 + timedelta(days=6), until=T0 + timedelta(days=30), canary_nights=nights)
    assert later.canary.count("confirmed") == 0 and later.canary.count("missed") == 1
    none = compute_ledger([], [], since=T0, until=T0 + timedelta(days=1))
    assert ledger_lines(none)[-1].startswith("Recall (canaries): — (no canary episode planted in the window")
    pending = compute_ledger([], [], since=T0, until=T0 + timedelta(days=30), canary_nights=[_n(4, verdict="suspect")])
    assert "1 episode(s) of +5% planted, none decided yet, 1 still planted" in ledger_lines(pending)[-1]


def test_judged_nights_keep_the_verdict_its_source_and_what_decided_it() -> None:
    def row(case: str, verdict: Verdict, *, label: str = "median of 6 nights", follows: str = "",
            metric: str = "latency") -> Comparison:
        figures = Figures(reference=1.0, reference_label=label, value=1.1, value_label="tonight, 3 samples",
                          follows=follows)
        return Comparison("ops", "npu", case, metric, "ms", True, BaselinePoint("r", "a" * 40, "ms", 1.0, 3),
                          Summary(1.1, 3), Judgement(verdict, 10.0, 10.0, 2.0, "", figures))

    tonight = canary.schedule(4, every_nights=4, hold_nights=1, slowdown_pct=10)
    rows = [row("add", Verdict.UNCHANGED), row("add [canary]", Verdict.SEVERE, label="A/B base 1234567, 5 runs"),
            row("add [canary]", Verdict.SEVERE, follows="latency", metric="speedup")]
    missing = replace(row("add [canary]", Verdict.MISSING, metric="tflops"), head=None)
    [n] = canary.judged_nights(tonight, [*rows, missing])   # a derived row is not counted twice; nor a missing one
    assert (n["verdict"], n["source_verdict"], n["how"], n["episode"], n["planted_pct"]) == \
        ("severe", "unchanged", "A/B", 4, 10.0)
    line = canary.night_line(n, canary.episodes([{**n, "suite": "ops", "at": T0}])[0])
    assert line == ("canary npu/add [canary] latency: planted +10% on night 4 (tonight night 4): severe +10.00%; "
                    "confirmed on night 4 (the night it was planted) by A/B")


def test_a_canary_row_never_opens_an_alert() -> None:
    from zlops.alerts.lifecycle import plan_night

    def row(case: str) -> Comparison:
        figures = Figures(reference=1.0, reference_label="A/B base 1234567, 5 runs", value=1.1,
                          value_label="A/B head, 5 runs")
        return Comparison("ops", "npu", case, "latency", "ms", True, BaselinePoint("r", "a" * 40, "ms", 1.0, 3),
                          Summary(1.1, 3), Judgement(Verdict.SEVERE, 10.0, 10.0, 2.0, "", figures))

    steps = plan_night([row("add"), row("add [canary]")], {}, band_pct=2.0)
    assert [s.comparison.case for s in steps] == ["add"]


# --- the config -----------------------------------------------------------------------------

def _config(canary_section: dict[str, Any], **suite: Any) -> Any:
    return parse_config({"pools": {"local": {"backend": "cpu", "devices": [0]}},
                         "suites": {"s": {"repo": "/x", "command": ["bench", "{results}"], "format": "zlops-json",
                                          "pools": ["local"], "canary": canary_section, **suite}}},
                        source="zlops.yaml")


def test_a_canary_section_is_checked_with_sentences_that_say_what_to_write() -> None:
    cfg = _config({"case": "add"}).suites["s"].canary
    assert (cfg.slowdown_pct, cfg.every_nights, cfg.hold_nights, cfg.enabled, cfg.metric, cfg.pools) == \
        (5.0, 14, 3, True, None, None)
    cases = [({"case": "add", "every_nights": 4, "hold_nights": 4},
              "zlops.yaml: suites.s.canary: hold_nights (4) must be below every_nights (4): an episode needs quiet "
              "nights after it, e.g. every_nights: 14, hold_nights: 3"),
             ({"case": "add", "pools": ["gpu"]},
              "zlops.yaml: suites.s: canary.pools: gpu not among the suite's pools (local); name some of those, or "
              "leave pools out for all of them"),
             ({"case": "add [canary]"}, "zlops.yaml: suites.s.canary.case: name a measured case, not a canary's "
                                        "series (drop '[canary]'), got 'add [canary]'"),
             ({"case": "add", "slowdown_pct": 0},
              "zlops.yaml: suites.s.canary.slowdown_pct: expected a number > 0 and <= 100, got 0"),
             ({}, "zlops.yaml: suites.s.canary.case: required key is missing"),
             ({"case": "add", "every": 3}, "suites.s.canary.every")]
    for section, message in cases:
        with pytest.raises(ConfigError) as err:
            _config(section)
        assert message in str(err.value), str(err.value)
    with pytest.raises(ConfigError, match="canary.case: 'add' is not one of partition.cases"):
        _config({"case": "add"}, partition={"cases": ["mul", "sub"]}, command=["bench", "{results}", "{cases}"])
