"""Recall canaries end to end: the real nightly on the CPU pool plants a known slowdown on its schedule, the
noise judge and its A/B confirm it, nobody is paged, and the trust ledger and the digest count it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from fake_upstream import Upstream, config_data

from zlops.config.settings import Config, parse_config
from zlops.model import Verdict, canary_case
from zlops.steps.context import open_store
from zlops.steps.nightly import run_nightly
from zlops.triage.trust import digest_payload, ledger, ledger_lines

pytestmark = pytest.mark.slow

CANARY = canary_case("beta")


def _config(make_config: Callable[..., Config], **canary: object) -> Config:
    data = make_config().model_dump()
    data.update(judge="noise")
    data["noise"].update(ab_pairs=7, ab_budget_s=600)
    if canary:
        data["suites"]["fake"]["canary"] = canary
    return parse_config(data)


def _night(upstream: Upstream, config: Config, i: int) -> dict[str, object]:
    """One night of a new quiet commit (alpha wanders 0.2%, beta stays): its stored rows by case."""
    sha = upstream.commit({"alpha": 1.0 * (1 + 0.002 * (i % 2)), "beta": 2.0}, f"quiet {i}")
    result = run_nightly(config, "fake", sha=sha, run_label=f"n{i}")
    assert all(not c.case.endswith("[canary]") for c in result.summary.comparisons)   # the exit code's rows
    return {"result": result, "rows": {c.case: c for c in open_store(config).comparisons(result.run_key)}}


def test_a_planted_slowdown_is_confirmed_by_the_ab_and_counted_in_the_ledger(
        upstream: Upstream, make_config: Callable[..., Config]) -> None:
    config = _config(make_config, case="beta", slowdown_pct=10, every_nights=4, hold_nights=1)
    store = open_store(config)
    nights = [_night(upstream, config, i) for i in range(6)]   # 0-3 quiet, 4 planted, 5 quiet again
    for i in (0, 1, 2, 3):
        rows = nights[i]["rows"]
        assert CANARY in rows   # an unscaled copy on quiet nights
        assert rows[CANARY].head is not None and rows[CANARY].head.median == pytest.approx(rows["beta"].head.median)
    planted = nights[4]["rows"]
    canary = planted[CANARY]
    assert canary.head is not None and canary.head.median == pytest.approx(2.2)   # beta's 2.0 x 1.10
    assert canary.verdict is Verdict.SEVERE, canary.judgement.note
    assert "confirmed by A/B" in canary.judgement.note
    assert canary.figures is not None and canary.figures.runs_head and \
        all(h == pytest.approx(2.2) for h in canary.figures.runs_head)      # the source's A/B runs, scaled
    assert all(b == pytest.approx(2.0) for b in canary.figures.runs_base)   # the base side unscaled
    assert planted["beta"].verdict is Verdict.UNCHANGED
    # nobody paged: no alert for the canary (nor for anything else), the report says it on a line of its own
    assert store.alerts(suite="fake") == []
    report = nights[4]["result"].report
    assert CANARY not in report.table.split("\nbaseline:")[0]
    line = next(x for x in report.table.splitlines() if x.startswith("canary "))
    assert "planted +10% on night 4" in line and "confirmed on night 4 (the night it was planted) by A/B" in line
    assert "## Recall canary" in report.markdown.read_text() and "Recall canary" in report.html.read_text()
    quiet = next(x for x in nights[5]["result"].report.table.splitlines() if x.startswith("canary "))
    assert "quiet night 5" in quiet
    # a rescore re-parses the night's artifacts: the canary is planted again as it was, decided by its own A/B runs
    from zlops.steps.rescore import rescore

    again = rescore(config, nights[4]["result"].run_key)
    assert [c for c in again.changes if c.case == CANARY and c.changed] == []
    assert {c.case: c for c in again.summary.comparisons}[CANARY].verdict is Verdict.SEVERE
    # the trust ledger (the page, the CLI and the digest print its lines)
    until = datetime.now(timezone.utc) + timedelta(minutes=1)
    led = ledger(store, days=1, until=until, suite="fake")
    assert led.canary.count("confirmed") == 1 and led.canary.recall == 1.0
    assert led.canary.nights_to_confirm == (0,)
    assert led.canary.false_alarms == 0 and led.canary.quiet_nights >= 4
    text = ledger_lines(led)
    recall = next(x for x in text if x.startswith("Recall (canaries)"))
    assert recall.startswith("Recall (canaries): 100% = 1 of 1 planted slowdown(s) (+10%) confirmed, 0 missed")
    assert "median 0 night(s)" in recall
    assert any("Recall (canaries): 100%" in b["text"]["text"] for b in digest_payload(led, channel="#c")["blocks"])
    # the canary's rows are zlops' own: not in the measurable share (4 series a night: alpha, beta x 6 nights)
    assert led.rows + led.verdicts.get("new", 0) == 12


def test_a_disabled_canary_plants_nothing_and_the_ledger_says_so(
        upstream: Upstream, make_config: Callable[..., Config]) -> None:
    config = _config(make_config, case="beta", every_nights=2, hold_nights=1, enabled=False)
    nights = [_night(upstream, config, i) for i in range(3)]
    for night in nights:
        assert CANARY not in night["rows"]
        assert not [x for x in night["result"].report.table.splitlines() if x.startswith("canary")]
    run = open_store(config).get_run(nights[-1]["result"].run_key)
    assert run is not None and "canary" not in run.meta
    led = ledger(open_store(config), days=1, until=datetime.now(timezone.utc) + timedelta(minutes=1), suite="fake")
    assert led.canary.episodes == () and "no canary episode planted" in ledger_lines(led)[-1]


def test_a_slowdown_below_the_floor_is_missed_and_a_retried_ingest_plants_once(
        upstream: Upstream, make_config: Callable[..., Config]) -> None:
    """+1% is inside the 2% floor: the judge rightly keeps quiet, and the ledger says the canary was missed (what
    recall is for: a deaf judge reads the same as a quiet upstream). The ingest step run again on the planted
    night (an Airflow retry) writes the same canary rows, never a second copy nor another place on the clock."""
    from zlops.steps.context import context_for
    from zlops.steps.ingest import ingest

    config = _config(make_config, case="beta", slowdown_pct=1, every_nights=2, hold_nights=1)
    store = open_store(config)
    nights = [_night(upstream, config, i) for i in range(3)]
    key = nights[2]["result"].run_key
    before = sorted((p, d, r.case, r.samples) for p, d, r in store.results(key))
    meta = store.get_run(key).meta["canary"]
    assert meta == {"night": 2, "active": True, "episode": 2, "pct": 1.0}
    ingest(context_for(config, "fake", key))
    assert sorted((p, d, r.case, r.samples) for p, d, r in store.results(key)) == before
    assert store.get_run(key).meta["canary"] == meta
    assert nights[2]["rows"][CANARY].verdict is Verdict.UNCHANGED
    after = _night(upstream, config, 3)
    line = next(x for x in after["result"].report.table.splitlines() if x.startswith("canary "))
    assert "quiet night 3" in line and "the +1% planted on night 2 was missed" in line
    led = ledger(store, days=1, until=datetime.now(timezone.utc) + timedelta(minutes=1), suite="fake")
    assert (led.canary.count("confirmed"), led.canary.count("missed"), led.canary.recall) == (0, 1, 0.0)
    assert ledger_lines(led)[-1].startswith("Recall (canaries): 0% = 0 of 1 planted slowdown(s) (+1%) confirmed, "
                                            "1 missed")


def test_a_paired_pool_judges_the_canary_from_its_sources_pairs(upstream: Upstream, tmp_path: Path) -> None:
    """A paired pool's night is judged from interleaved base and head processes (zlops.judge.paired): the
    canary's pairs are its source's, the head side scaled, so it is judged the way a real change would be."""
    data = config_data(tmp_path / "home", upstream.path)
    data["pools"]["local"]["measure"] = "paired"  # type: ignore[index]
    # the pairs a paired night runs are decided by its measured series (the canary is planted after them): 7 pairs,
    # so the rank test can reach alpha 0.002 on the canary too (5 + 5 cannot: it would stay a suspect)
    data["paired"] = {"min_pairs": 7, "max_pairs": 7, "quiet_wait_s": 0}
    data["suites"]["fake"]["canary"] = {"case": "beta", "slowdown_pct": 10,  # type: ignore[index]
                                        "every_nights": 2, "hold_nights": 1}
    config = parse_config(data)
    rows = [_night(upstream, config, i)["rows"] for i in range(3)]
    canary, beta = rows[2][CANARY], rows[2]["beta"]
    assert canary.verdict is Verdict.SEVERE and beta.verdict is Verdict.UNCHANGED, canary.judgement.note
    assert canary.figures is not None and (canary.figures.reference_label or "").startswith("paired base")
    assert all(h == pytest.approx(2.2) for h in canary.figures.runs_head)
    assert rows[1][CANARY].verdict is Verdict.UNCHANGED
    led = ledger(open_store(config), days=1, until=datetime.now(timezone.utc) + timedelta(minutes=1), suite="fake")
    assert led.canary.count("confirmed") == 1 and led.canary.episodes[0].how == "paired runs"
