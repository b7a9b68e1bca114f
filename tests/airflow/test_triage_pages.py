"""The triage pages on stored nights (tests/airflow/triage_nights.py): inbox, actions, series, cross-backend, links.

The pages alone, with a signed-in user injected in place of Airflow's authentication; Airflow's own
login, cookie, CSRF and role checks in front of them: tests/airflow/test_triage_airflow_auth.py.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("plotly")

from db_templates import Templates
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, select
from triage_nights import BAD_NIGHT, NIGHTS, POOLS, SUITE, Nights, copy_nights, run_key, sha

from zlops.airflow.ui import COOKIE, create_app
from zlops.alerts.lifecycle import AlertState
from zlops.cli import main
from zlops.report import cells
from zlops.store.models import Notification

pytestmark = [pytest.mark.airflow]

SERIES = {"suite": SUITE, "pool": "npu", "case": "softmax_8192", "metric": "time"}


class User:
    def __init__(self, name: str) -> None:
        self.name = name

    def get_name(self) -> str:
        return self.name


@pytest.fixture
def nights(tmp_path: Path, db_templates: Templates) -> Nights:
    return copy_nights(tmp_path, db_templates)


def _client(nights: Nights, *, user: str = "ana", may: bool = True) -> TestClient:
    app = create_app(nights.config, authenticate=lambda: User(user), authorize=lambda u, suite: may)
    client = TestClient(app)
    client.cookies.set(COOKIE, f"session-of-{user}")  # the browser's login cookie (checked by Airflow upstream)
    return client


def _csrf(client: TestClient) -> str:
    page = client.get("/alerts")
    assert page.status_code == 200
    (token,) = set(re.findall(r'name="csrf_token" value="([0-9a-f]+)"', page.text))
    return token


def _replies(nights: Nights) -> list[Notification]:
    with nights.store.session() as s:
        return list(s.scalars(select(Notification).where(Notification.kind.like("event-%"))))


def _figure(page: str) -> dict[str, Any]:
    (raw,) = re.findall(r'<script type="application/json" id="figure">(.*?)</script>', page, re.S)
    return json.loads(raw)


def test_inbox_groups_open_alerts_as_the_slack_summary_with_stored_numbers(nights: Nights) -> None:
    page = _client(nights).get("/alerts")
    assert page.status_code == 200
    text = html.unescape(page.text)
    # one group per (commit range x op family x pool), as the Slack summary and the alert threads group them
    span = f"{sha(BAD_NIGHT - 1)[:7]}..{sha(BAD_NIGHT)[:7]}"
    heads = re.findall(r"<h2>(.*?)</h2>", text, re.S)
    assert [re.sub(r"<[^>]+>|\s+", " ", h).split(":")[0].split() for h in heads] == [
        [SUITE, "·", "musa", "·", "softmax", "·", span], [SUITE, "·", "npu", "·", "softmax", "·", span]]
    for pool in ("npu", "musa"):
        a = nights.store.alert(nights.alerts[pool])
        row = text[text.index(f'id="alert-{a.id}"'):]
        row = row[:row.index("</tr>")]
        assert a.state.value in row and cells.fmt_change(a.last_change_pct) in row
        assert f"{cells.fmt_value(a.base_value, a.unit)} ± 2%" in row
        assert f"<code>{sha(BAD_NIGHT)[:7]}</code>" in row  # the culprit the judge's change point named
    npu = text[text.index(f'id="alert-{nights.alerts["npu"]}"'):]
    assert "A/B head, 4 runs" in npu[:npu.index("</tr>")] and "posted" in npu[:npu.index("</tr>")]


def test_ack_is_recorded_as_the_signed_in_user_and_queues_one_thread_reply(
        nights: Nights, capsys: pytest.CaptureFixture[str]) -> None:
    client = _client(nights, user="ana")
    alert_id = nights.alerts["npu"]
    form = {"action": "ack", "note": "bisecting 0606060", "csrf_token": _csrf(client), "actor": "mallory",
            "by": "mallory"}
    done = client.post(f"/alerts/{alert_id}", data=form, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == f"../alerts?changed={alert_id}#alert-{alert_id}"
    a = nights.store.alert(alert_id)
    assert (a.state, a.note) == (AlertState.ACKED, "bisecting 0606060")
    last = nights.store.alert_events(alert_id)[-1]
    assert (last["actor"], last["from_state"], last["to_state"]) == ("ana", "confirmed", "acked")  # never the form's
    (reply,) = _replies(nights)
    assert (reply.kind, reply.parent_id, reply.status) == (f"event-{last['id']}", nights.thread_root, "pending")
    assert "ana" in json.dumps(reply.payload) and "bisecting 0606060" in json.dumps(reply.payload)
    # a retried request (the answer was lost): the same change is answered, nothing more is written or queued
    again = client.post(f"/alerts/{alert_id}", data=form, headers={"Accept": "application/json"})
    assert again.status_code == 200
    assert again.json() == {"alert": alert_id, "from": "acked", "state": "acked", "actor": "ana",
                            "event_id": last["id"], "reply_id": reply.id, "repeated": True}
    assert len(_replies(nights)) == 1
    assert [e["actor"] for e in nights.store.alert_events(alert_id)].count("ana") == 1
    inbox = html.unescape(client.get(f"/alerts?changed={alert_id}").text)
    assert f"alert #{alert_id} npu / softmax_8192 (time) is now acked" in inbox
    row = inbox[inbox.index(f'id="alert-{alert_id}"'):]
    assert "ana" in row[:row.index("</tr>")]  # the owner column
    # the CLI shows the same history, as that user
    assert main(["alert", "show", str(alert_id), "--config", str(nights.config_path)]) == 0
    assert re.search(r"confirmed -> acked\s+ana \(announced\): bisecting 0606060", capsys.readouterr().out)
    # someone else acking it now is refused, and queues nothing
    other = _client(nights, user="bo")
    refused = other.post(f"/alerts/{alert_id}", data={"action": "ack", "csrf_token": _csrf(other)})
    assert refused.status_code == 409 and "already acked" in refused.text
    closed = other.post(f"/alerts/{alert_id}", data={"action": "wontfix", "note": "known", "csrf_token": _csrf(other)},
                        follow_redirects=False)
    assert closed.status_code == 303 and nights.store.alert(alert_id).state is AlertState.WONTFIX
    assert len(_replies(nights)) == 2


def test_the_cli_and_the_page_share_one_path(nights: Nights) -> None:
    musa = nights.alerts["musa"]  # never posted: its thread root waits in the outbox
    assert main(["alert", "expected", str(musa), "--note", "new tiling", "--by", "cy",
                 "--config", str(nights.config_path)]) == 0
    assert main(["alert", "expected", str(musa), "--note", "new tiling", "--by", "cy",
                 "--config", str(nights.config_path)]) == 0  # a retried command: recorded once
    (reply,) = _replies(nights)
    assert reply.parent_id == nights.store.alert(musa).thread_notification_id
    assert [e["actor"] for e in nights.store.alert_events(musa)] == ["zlops", "cy"]


@pytest.mark.parametrize(("form", "headers", "status"), [
    ({"action": "ack"}, {}, 403),                                       # no CSRF token
    ({"action": "ack", "csrf_token": "0" * 64}, {}, 403),               # a wrong one
    ({"action": "ack", "csrf_token": "GOOD"}, {"Sec-Fetch-Site": "cross-site"}, 403),
    ({"action": "delete", "csrf_token": "GOOD"}, {}, 422),              # not an action
    ({"action": "ack", "note": "x" * 2001, "csrf_token": "GOOD"}, {}, 422),
    ({"action": "ack", "note": "a\x07b", "csrf_token": "GOOD"}, {}, 422),  # control characters
    ({"note": "no action", "csrf_token": "GOOD"}, {}, 422),
])
def test_actions_validate_their_input_and_need_the_csrf_token(nights: Nights, form: dict[str, str],
                                                               headers: dict[str, str], status: int) -> None:
    client = _client(nights)
    good = _csrf(client)
    form = {k: (good if v == "GOOD" else v) for k, v in form.items()}
    answer = client.post(f"/alerts/{nights.alerts['npu']}", data=form, headers=headers, follow_redirects=False)
    assert answer.status_code == status, answer.text
    assert nights.store.alert(nights.alerts["npu"]).state is AlertState.CONFIRMED and _replies(nights) == []


def test_actions_need_the_permission_and_an_existing_alert(nights: Nights) -> None:
    viewer = _client(nights, may=False)
    answer = viewer.post(f"/alerts/{nights.alerts['npu']}", data={"action": "ack", "csrf_token": _csrf(viewer)})
    assert answer.status_code == 403 and "zlops_nightly_ops" in answer.text
    client = _client(nights)
    assert client.post("/alerts/999", data={"action": "ack", "csrf_token": _csrf(client)}).status_code == 404
    assert client.post("/alerts/0", data={"action": "ack", "csrf_token": _csrf(client)}).status_code == 422
    # an API client with an explicit bearer token needs no CSRF token (a browser never sends one by itself)
    bearer = TestClient(create_app(nights.config, authenticate=lambda: User("svc"), authorize=lambda u, s: True))
    done = bearer.post(f"/alerts/{nights.alerts['npu']}", data={"action": "false-positive", "note": "noise"},
                       headers={"Authorization": "Bearer token-checked-by-airflow", "Accept": "application/json"})
    assert done.status_code == 200 and done.json()["state"] == "false_positive" and done.json()["actor"] == "svc"


def test_series_page_draws_each_nights_raw_samples_and_the_stored_figures(nights: Nights) -> None:
    page = _client(nights).get("/series", params=SERIES)
    assert page.status_code == 200
    fig = _figure(page.text)
    comparisons = {n: c for n in range(1, NIGHTS) for c in nights.store.comparisons(run_key(n))
                   if (c.pool, c.case, c.metric) == ("npu", "softmax_8192", "time")}
    samples = {n: nights.store.run_samples(run_key(n), ["npu"])[("npu", "softmax_8192", "time")]
               for n in range(NIGHTS)}
    boxes = [t for t in fig["data"] if t["type"] == "box"]
    drawn = sorted(v for t in boxes for v in t["y"])
    assert drawn == sorted(v for s in samples.values() for v in s)  # every raw sample of every night
    assert {t["name"] for t in boxes} == {"samples (not compared)", "samples (unchanged)", "samples (regression)"}
    (median,) = [t for t in fig["data"] if t["name"] == "median"]
    assert len(median["x"]) == NIGHTS and median["x"] == sorted(median["x"])
    bad = comparisons[BAD_NIGHT]
    hover = html.unescape(median["hovertext"][BAD_NIGHT])
    assert f"change {cells.fmt_change(bad.judgement.change_pct)}" in hover and "A/B head, 4 runs" in hover
    (ab_head,) = [t for t in fig["data"] if t["name"] == "A/B head runs"]
    assert ab_head["y"] == list(bad.figures.runs_head) and "95% CI [+9.10%, +14.80%]" in html.unescape(
        ab_head["hovertext"][0])
    (refs,) = [t for t in fig["data"] if t["name"] == "the judge's reference that night"]
    assert refs["y"] == [comparisons[n].figures.reference for n in range(1, NIGHTS)]
    (clock,) = [t for t in fig["data"] if t["name"].startswith("pool clock")]
    assert clock["y"] == [1800.0 - 10 * n for n in range(NIGHTS)]
    alert = nights.store.alert(nights.alerts["npu"])
    assert any(s.get("y0") == alert.base_value for s in fig["layout"]["shapes"])  # the alert's reference
    marks = [a for a in fig["layout"]["annotations"] if a.get("text") == "level + first bad"]
    assert len(marks) == 1 and marks[0]["x"] == median["x"][BAD_NIGHT]
    text = html.unescape(page.text)
    assert f"A/B base, 4 runs: <b>{cells.fmt_value(bad.figures.reference, 'ms')}</b>" in text
    assert "95% CI [+9.10%, +14.80%], p = 0.0008" in text and "1750 MHz" in text
    assert "static/plotly.min.js" in page.text and "cdn" not in page.text.lower()
    few = _figure(_client(nights).get("/series", params={**SERIES, "nights": 3}).text)
    (few_medians,) = [t for t in few["data"] if t["name"] == "median"]
    assert len(few_medians["x"]) == 3


def test_cross_backend_page_shows_each_pools_stored_changes_side_by_side(nights: Nights) -> None:
    page = _client(nights).get("/cross", params={"suite": SUITE, "case": "softmax_8192", "metric": "time"})
    assert page.status_code == 200
    fig = _figure(page.text)
    bars = _bars_by_pool(fig)
    assert set(bars) == set(POOLS)
    for pool in POOLS:
        stored = [c for n in range(1, NIGHTS) for c in nights.store.comparisons(run_key(n))
                  if (c.pool, c.case, c.metric) == (pool, "softmax_8192", "time")]
        # the judge's own change per night, against that pool's reference, in night order
        assert [y for y, _, _ in bars[pool]] == [c.judgement.change_pct for c in stored]
        assert [t for _, t, _ in bars[pool]] == [cells.fmt_change(c.judgement.change_pct) for c in stored]
        assert [v for _, _, v in bars[pool]] == [c.verdict.label for c in stored]  # each bar's trace: its verdict
    assert bars["npu"][BAD_NIGHT - 1][0] > 5 and bars["musa"][BAD_NIGHT - 1][0] > 5
    assert abs(bars["cuda"][BAD_NIGHT - 1][0]) < 2  # slower on two backends, not on cuda
    titles = {a["text"] for a in fig["layout"]["annotations"]}
    assert {"npu (ascend)", "cuda (cuda)", "musa (musa)"} <= titles
    text = html.unescape(page.text)
    latest = {c.pool: c for c in nights.store.comparisons(run_key(NIGHTS - 1)) if c.case == "softmax_8192"}
    for c in latest.values():
        assert f"{cells.fmt_value(c.figures.value, 'ms')} ({c.figures.value_label})" in text
    only = _client(nights).get("/cross", params={"suite": SUITE, "case": "softmax_8192", "metric": "time",
                                                 "pool": ["npu", "cuda"], "nights": 2})
    assert {t["meta"] for t in _figure(only.text)["data"]} == {"npu", "cuda"}


def _bars_by_pool(fig: dict[str, Any]) -> dict[str, list[tuple[float, str, str]]]:
    """(change, label, verdict) of each pool's bars, in the order its panel's x axis lists the nights."""
    out: dict[str, list[tuple[float, str, str]]] = {}
    at: dict[str, dict[str, tuple[float, str, str]]] = {}
    axis: dict[str, str] = {}
    for t in fig["data"]:
        if t["type"] == "bar":
            axis[t["meta"]] = t.get("xaxis", "x")
            for x, y, text in zip(t["x"], t["y"], t["text"], strict=True):
                at.setdefault(t["meta"], {})[x] = (y, text, t["name"])
    for pool, by_x in at.items():
        order = fig["layout"]["xaxis" + axis[pool][1:]]["categoryarray"]
        assert sorted(order) == sorted(by_x)
        out[pool] = [by_x[x] for x in order]
    return out


def _legend_problems(fig: dict[str, Any]) -> list[str]:
    """What of a chart a reader cannot name from its legend: a trace left out of it, a colour no legend entry
    has, a heatmap without a titled colour bar, a legend switched off."""
    data, layout = fig["data"], fig["layout"]
    shown = [t for t in data if t["type"] != "heatmap" and t.get("showlegend", True) is not False]
    problems = []
    if shown and (layout.get("showlegend") is False or (len(shown) == 1 and layout.get("showlegend") is not True)):
        problems.append("the legend is not drawn")
    colours = {c for t in shown for c in (t.get("marker", {}).get("color"), t.get("line", {}).get("color"))
               if isinstance(c, str)}
    groups = {t.get("legendgroup") for t in shown} - {None}
    for t in data:
        if t["type"] == "heatmap":
            if not t.get("colorbar", {}).get("title", {}).get("text"):
                problems.append("a heatmap without a titled colour bar")
            continue
        if t.get("showlegend", True) is False and t.get("legendgroup") not in groups:
            problems.append(f"trace {t.get('name')!r} is not in the legend")
        used = t.get("marker", {}).get("color")
        for c in [used] if isinstance(used, str) else (used or []):
            if c not in colours:
                problems.append(f"colour {c} of {t.get('name')!r} has no legend entry")
    return sorted(set(problems))


def test_every_chart_has_a_legend_for_its_colours(nights: Nights) -> None:
    client = _client(nights)
    pages = {"series": client.get("/series", params=SERIES),
             "cross": client.get("/cross", params={"suite": SUITE, "case": "softmax_8192", "metric": "time"}),
             "matrix": client.get("/matrix", params={"suite": SUITE, "run": run_key(BAD_NIGHT)})}
    problems = {}
    for name, page in pages.items():
        assert page.status_code == 200, name
        problems[name] = _legend_problems(_figure(page.text))
    assert problems == {"series": [], "cross": [], "matrix": []}
    cross = _figure(pages["cross"].text)
    legend = [t["name"] for t in cross["data"] if t.get("showlegend", True) is not False]
    assert sorted(legend) == ["regression", "unchanged"]  # each bar colour named once
    assert [s.get("name") for s in cross["layout"]["shapes"] if s.get("showlegend")] == [
        "the pool's threshold (shaded)"]


def _axes_with_data(fig: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The y axes the layout draws, and those at least one trace puts a value on."""
    drawn = {"y" + k[len("yaxis"):] for k in fig["layout"] if k.startswith("yaxis")}
    used = {t.get("yaxis", "y") for t in fig["data"] if any(v is not None for v in t.get("y", ()))}
    return drawn, used


@pytest.mark.parametrize(("clock", "temp", "titles"), [
    (True, False, {"MHz"}),          # a CPU pool: a clock, no temperature
    (False, True, {"°C"}),
    (True, True, {"MHz", "°C"}),
    (False, False, set()),           # no telemetry: no strip at all
])
def test_a_series_draws_an_axis_only_for_the_telemetry_it_has(nights: Nights, clock: bool, temp: bool,
                                                             titles: set[str]) -> None:
    from dataclasses import replace

    from zlops.airflow.charts import series_figure
    from zlops.triage.series import series_view

    view = series_view(nights.store, SUITE, "npu", "softmax_8192", "time")
    view = replace(view, nights=tuple(replace(n, clock_mhz=n.clock_mhz if clock else None,
                                              temp_c=n.temp_c if temp else None) for n in view.nights))
    fig = json.loads(series_figure(view))
    drawn, used = _axes_with_data(fig)
    assert drawn == used, "an axis without data"
    shown = {ax.get("title", {}).get("text") for k, ax in fig["layout"].items() if k.startswith("yaxis")}
    assert shown - {"time (ms)"} == titles
    names = {t["name"] for t in fig["data"]}
    assert ("pool max temperature (°C)" in names) is temp and ("pool clock (MHz, median)" in names) is clock


def test_a_series_rows_figures_say_which_samples_they_come_from(nights: Nights) -> None:
    from zlops.airflow.charts import night_label
    from zlops.triage.series import series_view

    page = _client(nights).get("/series", params=SERIES)
    text = html.unescape(page.text)
    table = text[text.index('<table class="nights">'):]
    table = table[:table.index("</table>")]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"<tr><td>([^<]*)</td>.*?</tr>", table, re.S)}
    view = series_view(nights.store, SUITE, "npu", "softmax_8192", "time")
    assert len(rows) == NIGHTS
    for n in view.nights:
        row = rows[night_label(n)]
        # the night's own pooled samples, named as such
        night = f"{cells.fmt_value(n.median, 'ms')}<br><span class=\"muted\">night: median of {n.n} samples</span>"
        assert night in row
        c = n.comparison
        if c is None:
            continue
        f = c.figures
        # the verdict's samples, named by its own stored figures, beside the change computed from exactly those
        assert f"{f.value_label}: <b>{cells.fmt_value(f.value, 'ms')}</b>" in row
        assert f"{f.reference_label}: <b>{cells.fmt_value(f.reference, 'ms')}</b>" in row
        assert cells.fmt_change(c.judgement.change_pct) in row
    bad = rows[night_label(view.nights[BAD_NIGHT])]
    assert "A/B head, 4 runs: <b>" in bad and "A/B base, 4 runs: <b>" in bad and "tonight, " not in bad
    assert "tonight, 5 samples: <b>" in rows[night_label(view.nights[BAD_NIGHT - 1])]


@pytest.fixture
def statements() -> Iterator[list[str]]:
    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", count)


def test_a_page_costs_the_same_queries_for_3_or_8_nights(nights: Nights, statements: list[str]) -> None:
    client = _client(nights)
    counts = []
    for n in (3, 8):
        statements.clear()
        assert client.get("/series", params={**SERIES, "nights": n}).status_code == 200
        counts.append(len([s for s in statements if s.lstrip().upper().startswith("SELECT")]))
    assert counts[0] == counts[1], counts


@pytest.mark.parametrize("query", [{"nights": 0}, {"nights": 366}, {"case": "x" * 501}, {"pool": None}])
def test_page_parameters_are_validated(nights: Nights, query: dict[str, Any]) -> None:
    params = {k: v for k, v in {**SERIES, **query}.items() if v is not None}
    assert _client(nights).get("/series", params=params).status_code == 422


def test_unknown_series_answers_404_with_a_message(nights: Nights) -> None:
    page = _client(nights).get("/series", params={**SERIES, "case": "nosuch"})
    assert page.status_code == 404 and "No accepted nights of this series are stored" in page.text
    cross = _client(nights).get("/cross", params={"suite": SUITE, "case": "nosuch", "metric": "time"})
    assert cross.status_code == 404 and "No pool has stored this series" in cross.text


def test_links_both_ways_between_a_dag_run_and_its_report(nights: Nights) -> None:
    client = _client(nights)
    index = client.get("/")
    run_id = run_key(BAD_NIGHT).split(":", 2)[2]
    dag_run = f"../dags/zlops_nightly_{SUITE}/runs/{run_id.replace(':', '%3A').replace('+', '%2B')}"
    assert f'href="{dag_run}" target="_top"' in html.unescape(index.text)
    page = client.get("/airflow-run", params={"dag_id": f"zlops_nightly_{SUITE}", "run_id": run_id})
    assert page.status_code == 200 and run_key(BAD_NIGHT) in html.unescape(page.text)
    assert f'href="{dag_run}"' in html.unescape(page.text)  # and back
    other = client.get("/airflow-run", params={"dag_id": "etl", "run_id": "manual__x"})
    assert other.status_code == 200 and "not a zlops nightly DAG" in other.text
    missing = client.get("/airflow-run", params={"dag_id": f"zlops_nightly_{SUITE}", "run_id": "manual__nope"})
    assert missing.status_code == 404 and "No zlops run" in missing.text
    assert client.get("/airflow-run", params={"dag_id": f"zlops_nightly_{SUITE}", "run_id": "a b"}).status_code == 400


@pytest.mark.slow  # imports airflow.sdk (~10 s on a busy 2-core machine)
def test_the_extra_link_of_a_nightly_task_opens_its_report() -> None:
    from types import SimpleNamespace

    from zlops.airflow.links import ZlopsReportLink, report_url

    run_id = "scheduled__2026-11-30T02:00:00+00:00"
    key = SimpleNamespace(dag_id=f"zlops_nightly_{SUITE}", run_id=run_id, task_id="compare", map_index=-1,
                          try_number=1)
    assert ZlopsReportLink().get_link(None, ti_key=key) == report_url(key.dag_id, run_id) == (
        f"/zlops/airflow-run?dag_id=zlops_nightly_{SUITE}&run_id=scheduled__2026-11-30T02%3A00%3A00%2B00%3A00")
    assert report_url(key.dag_id, run_id, base_url="https://af.example.com/").startswith(
        "https://af.example.com/zlops/airflow-run?")
    assert ZlopsReportLink().get_link(None, ti_key=SimpleNamespace(dag_id="etl", run_id=run_id)) == ""


def test_plotly_js_is_served_from_the_plugin(nights: Nights) -> None:
    js = _client(nights).get("/static/plotly.min.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert b"plotly" in js.content[:2000].lower() and len(js.content) > 1_000_000


def test_a_bisections_culprit_shows_in_the_inbox_and_on_the_series_page(nights: Nights) -> None:
    """A finished bisection's verified culprit replaces the change point's guess in the inbox, and the
    alert's series page shows the culprit block (sha, subject, author, steps) from the store."""
    from zlops.bisect.search import Outcome, State, StepKind, StepRecord, Target

    alert_id = nights.alerts["npu"]
    commits = [sha(n) for n in range(BAD_NIGHT - 1, BAD_NIGHT + 1)]
    culprit = sha(BAD_NIGHT)
    b = nights.store.open_bisection(suite=SUITE, pool="npu", device=0, commits=commits,
                                    targets=[Target("softmax_8192", "time", "s")], alert_ids=[alert_id])
    nights.store.save_bisection_step(b.id, StepRecord(StepKind.VERIFY, culprit, commits[0], 1, Outcome.BAD,
                                                      pairs=4, seconds=12.5, builds=2, note="reproduced"))
    client = _client(nights)
    before = html.unescape(client.get("/series", params=SERIES).text)
    assert "Culprit (bisection)" in before    # running: the block says so, without a culprit yet
    nights.store.set_bisection_state(b.id, State.FOUND, reason="verified against its parent",
                                     culprit=(culprit, "softmax: <tiles>", "Ann <ann@example.com>"))
    assert nights.store.culprits_of_alerts([alert_id, 999]) == {alert_id: culprit}
    inbox = html.unescape(client.get("/alerts").text)
    row = inbox[inbox.index(f'id="alert-{alert_id}"'):]
    assert f"<code>{culprit}</code>" in row[:row.index("</tr>")]
    page = client.get("/series", params=SERIES).text
    assert "softmax: &lt;tiles&gt;" in page and "<tiles>" not in page   # escaped, from the store
    assert culprit[:7] in page and "Ann" in page
