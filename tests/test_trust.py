"""The trust ledger (zlops.triage.trust) on a constructed store: the stored nights of tests/triage_nights.py, two more
alerts through the real lifecycle (one cleared by the judge, one a person calls a false positive), people's
changes through zlops.triage.actions, coverage gaps in the compare tables, and event times set to known values.

And the weekly digest: the CLI prints the page's lines, queues one message per window in the outbox and
sends it with a real slack_sdk client to the fake Slack API (tests/fake_slack.py).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from db_templates import Templates
from fake_slack import CHANNEL_ID, TOKEN, fake_slack_server
from sqlalchemy import Engine, event, select, update
from triage_nights import BAD_NIGHT, SUITE, T0, Nights, build, copy_nights, run_key, sha

from zlops.alerts.lifecycle import AlertState
from zlops.cli import main
from zlops.model import BaselinePoint, CompareSummary, Comparison, Figures, Judgement, Summary, Verdict
from zlops.slack.announce import update_alerts
from zlops.store.models import AlertEvent, AlertRow, Notification
from zlops.triage.actions import change_alert
from zlops.triage.trust import compute_ledger, ledger, ledger_lines, queue_digest

CONFIRMED_AT = T0 + timedelta(days=BAD_NIGHT, minutes=40)


def _row(case: str, verdict: Verdict, night: int, *, change: float = 0.0) -> Comparison:
    figures = Figures(reference=1.0, reference_label="median of the last nights", value=1.0 + change / 100,
                      value_label="tonight, 5 samples", unit="ms", threshold_pct=2.0)
    return Comparison(SUITE, "cuda", case, "time", "ms", True,
                      BaselinePoint(run_key(night - 1), sha(night - 1), "ms", 1.0, 1), Summary(1.0 + change / 100, 1),
                      Judgement(verdict, None, None, 2.0, f"{verdict.value} tonight", figures))


def _gap(case: str, verdict: Verdict, night: int) -> Comparison:
    return Comparison(SUITE, "cuda", case, "time", "ms", True, None, None,
                      Judgement(verdict, None, None, None, f"{verdict.value}: the judge could not judge it"))


def _night(n: Nights, night: int, extra: list[Comparison]) -> None:
    """Add rows to a stored night's compare table and run the alert lifecycle over them."""
    key = run_key(night)
    rows = [*n.store.comparisons(key), *extra]
    n.store.save_comparisons(key, rows)
    run = n.store.get_run(key)
    assert run is not None
    update_alerts(n.store, run=run, summary=CompareSummary(key, SUITE, run.sha, tuple(extra)), channel="#perf",
                  band_pct=2.0, trends={})


def _alert_id(n: Nights, case: str) -> int:
    (a,) = [a for a in n.store.alerts(suite=SUITE) if a.case == case]
    return a.id


def _week(tmp: Path, *, database: str | None = None) -> Nights:
    """The stored nights of tests/triage_nights.py, then nights 6 and 7 and people's changes at known times."""
    n = build(tmp, database=database)
    # night 6: two suspects open unannounced `new` alerts; an unmeasurable and an invalid series
    _night(n, 6, [_row("gelu_1024", Verdict.SUSPECT, 6, change=4.0), _row("relu_64", Verdict.SUSPECT, 6, change=3.5),
                  _gap("exp_32", Verdict.UNMEASURABLE, 6), _gap("log_32", Verdict.INVALID, 6)])
    # night 7: the judge clears gelu; a missing series and a new one (no baseline: not counted)
    _night(n, 7, [_row("gelu_1024", Verdict.UNCHANGED, 7, change=0.2), _gap("tanh_16", Verdict.MISSING, 7),
                  _gap("sin_8", Verdict.NEW, 7)])
    npu, musa, relu = n.alerts["npu"], n.alerts["musa"], _alert_id(n, "relu_64")
    change_alert(n.store, npu, AlertState.ACKED, note="bisecting", actor="ana")
    change_alert(n.store, npu, AlertState.WONTFIX, note="accepted", actor="bo")
    change_alert(n.store, musa, AlertState.FALSE_POSITIVE, note="noisy host", actor="cy")
    change_alert(n.store, relu, AlertState.FALSE_POSITIVE, note="noise", actor="cy")
    # known times: each alert opened at its night; people act 3 h (ana), 10 h (bo), 5 h (cy) after night 5
    opened = {npu: CONFIRMED_AT, musa: CONFIRMED_AT, relu: T0 + timedelta(days=6, minutes=40),
              _alert_id(n, "gelu_1024"): T0 + timedelta(days=6, minutes=40)}
    people = {"ana": 3, "bo": 10, "cy": 5}
    with n.store.session() as s:
        for alert_id, at in opened.items():
            s.execute(update(AlertRow).where(AlertRow.id == alert_id).values(opened_at=at))
            s.execute(update(AlertEvent).where(AlertEvent.alert_id == alert_id, AlertEvent.run_id.is_not(None))
                      .values(at=at))
        for actor, hours in people.items():
            s.execute(update(AlertEvent).where(AlertEvent.actor == actor)
                      .values(at=CONFIRMED_AT + timedelta(hours=hours)))
        s.execute(update(AlertEvent).where(AlertEvent.to_state == "cleared")
                  .values(at=T0 + timedelta(days=7, minutes=40)))
        s.commit()
    return n


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def nights(tmp_path: Path, request: pytest.FixtureRequest, db_templates: Templates) -> Nights:
    """This test's own copy of :func:`_week`, stored once per session and backend."""
    pg = request.getfixturevalue("pg_databases") if request.param == "postgresql" else None
    return copy_nights(tmp_path, db_templates, backend=request.param, pg=pg, key="trust-week", build_nights=_week)


def test_the_ledger_of_a_week_counts_what_people_and_the_judge_did(nights: Nights) -> None:
    led = ledger(nights.store, days=9, until=T0 + timedelta(days=9))
    assert (led.opened, led.confirmed, led.fixed, led.cleared, led.waiting) == (4, 2, 0, 1, 0)
    assert dict(led.by_people) == {"acked": 1, "expected": 0, "false_positive": 2, "wontfix": 1}
    # confirmation -> the first person's change: npu 3 h (ana; bo's later change does not count), musa 5 h
    assert led.triage_hours == (3.0, 5.0) and led.median_triage_hours == 4.0
    # precision from people's verdicts: npu's latest is wontfix (real), musa false-positive -> 1 of 2
    assert (led.judged, led.judged_real, led.precision) == (2, 1, 0.5)
    # relu was never confirmed: its false positive is counted apart, not against the confirmed alerts
    assert (led.judged_unconfirmed, led.unconfirmed_false_positive) == (1, 1)
    # 7 compared nights x 3 pools x 2 cases = 42 judged rows, + 2 suspects + gelu's unchanged row, + 3 gaps;
    # the new row is not counted
    assert led.nights == 8 and led.rows == 48 and led.measurable == 45
    assert led.gaps == {"unmeasurable": 1, "invalid": 1, "missing": 1, "failed": 0, "incomparable": 0}
    assert led.measurable_share == pytest.approx(45 / 48)
    lines = ledger_lines(led)
    assert ("Precision from people's verdicts: 50% = 1 of 2 confirmed alert(s) judged by people were not "
            "false-positive") in lines
    assert any(line.startswith("Time to triage (confirmation to the first person's change): median 4.0 h over 2 "
                               "alert(s), longest 5.0 h") for line in lines)
    assert any(line.startswith("Measurable: 93.8% = 45 of 48 series-nights (1 unmeasurable, 1 invalid, 1 missing, "
                               "0 failed, 0 incomparable; 1 new") for line in lines)


def test_the_ledger_as_it_stood_at_the_windows_end(nights: Nights) -> None:
    # 4 h after the confirmation: ana had acked npu, cy had not yet looked at musa
    led = ledger(nights.store, days=1, until=CONFIRMED_AT + timedelta(hours=4))
    assert (led.opened, led.confirmed, led.waiting) == (2, 2, 1)
    assert led.triage_hours == (3.0,) and (led.judged, led.judged_real) == (1, 1)
    assert dict(led.by_people) == {"acked": 1, "expected": 0, "false_positive": 0, "wontfix": 0}
    # a window before anything happened
    empty = ledger(nights.store, days=1, until=T0)
    assert (empty.opened, empty.rows, empty.precision, empty.measurable_share) == (0, 0, None, None)
    assert "Precision from people's verdicts: — (no confirmed alert judged by a person yet)" in ledger_lines(empty)
    with pytest.raises(ValueError, match=r"days: expected 1\.\.366"):
        ledger(nights.store, days=0)


def test_the_ledger_costs_five_queries_whatever_the_window(nights: Nights) -> None:
    """Alerts, their events, the verdict counts, the recall canaries' nights and the nights' stored coverage: one
    query each."""
    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", count)
    try:
        counts = []
        for days in (2, 5, 60):  # 4, 4 and 4 alerts, 2, 5 and 7 nights
            seen.clear()
            ledger(nights.store, days=days, until=T0 + timedelta(days=7))
            counts.append(len([s for s in seen if s.lstrip().upper().startswith("SELECT")]))
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    assert counts == [5, 5, 5], counts


def test_one_suites_ledger(nights: Nights) -> None:
    assert ledger(nights.store, days=9, until=T0 + timedelta(days=9), suite="other").opened == 0
    assert ledger(nights.store, days=9, until=T0 + timedelta(days=9), suite=SUITE).opened == 4


def test_compute_ledger_is_pure_and_ignores_events_after_the_end() -> None:
    t = datetime(2026, 11, 2, 9, 0).astimezone()
    alerts = [{"id": 1}, {"id": 2}]
    events = [{"alert_id": 1, "at": t, "to_state": "confirmed", "by_person": False},
              {"alert_id": 1, "at": t + timedelta(hours=30), "to_state": "false_positive", "by_person": True},
              {"alert_id": 2, "at": t, "to_state": "new", "by_person": False},
              {"alert_id": 2, "at": t + timedelta(days=9), "to_state": "acked", "by_person": True}]
    led = compute_ledger(alerts, events, since=t - timedelta(days=1), until=t + timedelta(days=2),
                         verdicts={"unchanged": 9, "failed": 1, "new": 4})
    assert (led.confirmed, led.judged, led.precision, led.triage_hours) == (1, 1, 0.0, (30.0,))
    assert led.judged_unconfirmed == 0  # alert 2's ack came after the window's end
    assert (led.rows, led.measurable) == (10, 9)
    assert statistics.median(led.triage_hours) == led.median_triage_hours


def _config_with_slack(nights: Nights, tmp_path: Path, url: str) -> Path:
    data = yaml.safe_load(nights.config_path.read_text())
    data["slack"] = {"channel": "#perf", "base_url": url}
    path = tmp_path / "zlops-slack.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_digest_is_queued_once_per_window_and_sent_through_the_outbox(
        nights: Nights, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    until = "2026-11-10T02:00Z"
    led = ledger(nights.store, days=9, until=datetime.fromisoformat("2026-11-10T02:00+00:00"))
    # no token: printed and queued, filed under the newest nightly before the window's end
    assert main(["digest", "--config", str(nights.config_path), "--days", "9", "--until", until]) == 0
    out = capsys.readouterr().out
    assert all(line in out for line in ledger_lines(led)) and "no Slack token in $SLACK_BOT_TOKEN" in out
    with nights.store.session() as s:
        (queued,) = s.scalars(select(Notification).where(Notification.kind.like("digest-%"))).all()
        assert queued.status == "pending" and queued.run_id is not None
        text = json.dumps(queued.payload)
    assert "1 of 2 confirmed alert(s) judged by people" in text
    # again (a retried DAG run): the same message
    assert queue_digest(nights.store, led, channel="#perf")[0] == queued.id
    # with a token: the flush sends it to Slack
    with fake_slack_server() as fake:
        monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
        config = _config_with_slack(nights, tmp_path, fake.url)
        assert main(["digest", "--config", str(config), "--days", "9", "--until", until]) == 0
        assert "digest sent" in capsys.readouterr().out
        posts = [p for p in fake.posts() if "trust ledger" in p.get("text", "")]
    assert len(posts) == 1 and posts[0]["channel"] in ("#perf", CHANNEL_ID)
    assert "Precision from people's verdicts: 50%" in json.dumps(posts[0]["blocks"])
    with nights.store.session() as s:
        assert s.scalars(select(Notification.status).where(Notification.id == queued.id)).one() == "sent"


def test_the_digest_cli_refuses_bad_input(nights: Nights, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(nights.config_path)
    assert main(["digest", "--config", config, "--suite", "nosuch"]) == 2
    assert "unknown suite 'nosuch'" in capsys.readouterr().err
    assert main(["digest", "--config", config, "--days", "0"]) == 2
    assert main(["digest", "--config", config, "--print-only", "--days", "9",
                 "--until", "2026-11-10T02:00Z"]) == 0
    assert "Alerts opened: 4" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["digest", "--config", config, "--until", "next tuesday"])
    assert "expected an ISO date" in capsys.readouterr().err
    assert main(["digest", "--config", config, "--until", "2026-10-01"]) == 1  # no nightly before it
    assert "nothing to digest" in capsys.readouterr().err


def test_the_ledger_dataclass_is_frozen(nights: Nights) -> None:
    led = ledger(nights.store, days=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        led.opened = 3  # type: ignore[misc]
