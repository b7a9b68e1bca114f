"""The night pages on stored nights (tests/triage_nights.py): the op family x pool matrix, the run page's shards,
task-log links and schedule, a night's coverage, the trust ledger; every one behind the login.

The pages alone, with the login emulated by a dependency that answers 401 without the UI's cookie (as
Airflow's ``get_user`` does); Airflow's own login in front of them: tests/airflow/test_triage_airflow_auth.py.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("plotly")

from db_templates import Templates
from fastapi import HTTPException, Request
from fastapi.testclient import TestClient
from triage_nights import BAD_NIGHT, NIGHTS, POOLS, SUITE, T0, Nights, copy_nights, run_key, sha

from zlops.airflow.ui import COOKIE, create_app
from zlops.judge import coverage as cover
from zlops.model import (
    CaseResult,
    CompareSummary,
    Comparison,
    Judgement,
    RunRecord,
    RunStatus,
    ShardOutcome,
    ShardStatus,
    Verdict,
)
from zlops.report import cells
from zlops.report.table import row_cells
from zlops.run.partition import fmt_duration, make_plan
from zlops.triage.night import MatrixCell, MatrixRow, matrix_view, run_judging
from zlops.triage.trust import ledger, ledger_lines

pytestmark = [pytest.mark.airflow]

NEW_ROUTES = ("/matrix", f"/matrix?suite={SUITE}", "/coverage", f"/coverage?suite={SUITE}", "/trust",
              "/trust?days=30", f"/run?key={run_key(BAD_NIGHT).replace('+', '%2B')}")


class User:
    def get_name(self) -> str:
        return "ana"


def _logged_in(request: Request) -> User:
    if not request.cookies.get(COOKIE):
        raise HTTPException(401, "Not authenticated")
    return User()


@pytest.fixture
def nights(tmp_path: Path, db_templates: Templates) -> Nights:
    return copy_nights(tmp_path, db_templates)


def _client(nights: Nights, *, login: bool = True) -> TestClient:
    client = TestClient(create_app(nights.config, authenticate=_logged_in, authorize=lambda u, s: True))
    if login:
        client.cookies.set(COOKIE, "session-of-ana")
    return client


def _figure(page: str) -> dict[str, Any]:
    (raw,) = re.findall(r'<script type="application/json" id="figure">(.*?)</script>', page, re.S)
    return json.loads(raw)


@pytest.mark.parametrize("path", NEW_ROUTES)
def test_every_night_page_needs_the_login(nights: Nights, path: str) -> None:
    answer = _client(nights, login=False).get(path)
    assert answer.status_code == 401 and "softmax" not in answer.text and "ledger" not in answer.text
    assert _client(nights).get(path).status_code == 200


def test_a_signed_out_deep_link_goes_to_airflows_login_with_the_way_back(nights: Nights) -> None:
    client = _client(nights, login=False)
    deep = f"/series?suite={SUITE}&pool=npu&case=softmax_8192&metric=time&nights=8"
    browser = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
    answer = client.get(deep, headers=browser, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/api/v2/auth/login?" + urlencode({"next": deep})
    assert "softmax" not in answer.text
    # an API client, a bearer token and a POST keep their 401: only a browser's page view is sent to sign in
    assert client.get(deep).status_code == 401
    assert client.get(deep, headers={**browser, "Authorization": "Bearer x"}).status_code == 401
    assert client.post("/alerts/1", data={"action": "ack"}, headers=browser).status_code == 401


def test_every_row_of_the_run_pages_comparison_links_to_its_series(nights: Nights) -> None:
    page = _client(nights).get("/run", params={"key": run_key(BAD_NIGHT)})
    assert page.status_code == 200
    text = html.unescape(page.text)
    stored = nights.store.comparisons(run_key(BAD_NIGHT))
    tables = {pool: body.split("</table>")[0]
              for pool, body in re.findall(r'<table class="comparison" data-pool="([^"]+)">(.*?)</table>', text, re.S)}
    assert set(tables) == set(POOLS)
    linked = [row for body in tables.values() for row in re.findall(r"<tr class=.*?</tr>", body, re.S)]
    assert len(linked) == len(stored) == 6  # every row, none left as plain text
    for c in stored:
        series = f'<a href="series?suite={SUITE}&pool={c.pool}&case={c.case}&metric={c.metric}">{c.case}</a>'
        (row,) = [r for r in re.findall(r"<tr class=.*?</tr>", tables[c.pool], re.S) if series in r]
        _, base, head, delta, change, mark = row_cells(c, c.case)  # the report's own cells, not the page's
        assert re.findall(r'<td class="num">(.*?)</td>', row) == [base, head, delta, change]
        assert f'<tr class="{c.verdict.value}">' in row and mark in row
    # the flagged ones, worst first, link to their series too
    flagged = re.findall(r'<li class="regression">!! REGRESSION: <a href="series\?([^"]+)">([^<]+)</a>', text)
    assert [name for _, name in flagged] == ["musa / softmax_8192 (time)", "npu / softmax_8192 (time)"]
    overall = CompareSummary(run_key(BAD_NIGHT), SUITE, sha(BAD_NIGHT), tuple(stored)).overall_line()
    assert f"<b>{overall}</b>" in text


def test_the_matrix_reads_two_backends_apart_from_every_backend(nights: Nights) -> None:
    page = _client(nights).get("/matrix", params={"suite": SUITE, "run": run_key(BAD_NIGHT)})
    assert page.status_code == 200
    text = html.unescape(page.text)
    stored = {(c.pool, c.case): c for c in nights.store.comparisons(run_key(BAD_NIGHT))}
    # softmax regressed on npu and musa, not on cuda: the grid says two of three pools, by name
    view = matrix_view(nights.store, SUITE, run_key=run_key(BAD_NIGHT))
    assert [r.family for r in view.rows] == ["softmax", "matmul"]
    assert view.rows[0].reach == "2 of 3 pools: musa, npu" and view.rows[1].reach == ""
    assert [p for p, _ in view.pools] == sorted(POOLS) and dict(view.pools)["npu"] == "ascend"
    for pool in POOLS:
        c = stored[(pool, "softmax_8192")]
        cell = text[text.index(f'data-family="softmax" data-pool="{pool}"'):]
        cell = cell[:cell.index("</td>")]
        series = f'series?suite={SUITE}&pool={pool}&case=softmax_8192&metric=time'
        assert f'<a href="{series}">{cells.fmt_change(c.judgement.change_pct)}</a> {c.verdict.label}' in cell
        assert f'cross?suite={SUITE}&case=softmax_8192&metric=time' in cell and "of 1 flagged" in cell
    assert "2 of 3 pools: musa, npu" in text
    fig = _figure(page.text)
    (heat,) = fig["data"]
    assert heat["type"] == "heatmap" and heat["x"] == sorted(POOLS) and heat["y"] == ["softmax", "matmul"]
    assert heat["z"][0] == [stored[(p, "softmax_8192")].judgement.worse_pct for p in sorted(POOLS)]
    npu = sorted(POOLS).index("npu")
    assert heat["customdata"][0][npu] == f"series?suite={SUITE}&pool=npu&case=softmax_8192&metric=time"
    assert 'chart.on("plotly_click"' in page.text


def test_a_family_flagged_on_every_pool_reads_as_above_the_backends(nights: Nights) -> None:
    def flagged(c: Comparison) -> Comparison:
        return dataclasses.replace(c, judgement=dataclasses.replace(c.judgement, verdict=Verdict.REGRESSION))

    rows = {pool: MatrixCell("softmax", pool, (flagged(c),)) for c in nights.store.comparisons(run_key(BAD_NIGHT))
            for pool in [c.pool] if c.case == "softmax_8192"}
    assert MatrixRow("softmax", rows).reach.startswith("every pool (3 of 3)")
    one = {**rows, **{p: MatrixCell("softmax", p, ()) for p in ("cuda", "musa")}}
    assert MatrixRow("softmax", one).reach == "one pool of 3: npu"


def test_the_matrix_defaults_to_the_newest_night_and_says_when_there_is_none(nights: Nights) -> None:
    latest = _client(nights).get("/matrix")
    assert latest.status_code == 200 and run_key(NIGHTS - 1) in html.unescape(latest.text)
    for params in ({"suite": "nosuch"}, {"suite": SUITE, "run": "nightly:ops:nope"}):
        missing = _client(nights).get("/matrix", params=params)
        assert missing.status_code == 404 and "No compared night" in missing.text
    assert _client(nights).get("/matrix", params={"run": "x" * 251}).status_code == 422


def _partitioned_run(nights: Nights, *, airflow: bool) -> tuple[str, Any]:
    """A run whose npu pool ran 4 cases over 2 devices by an LPT plan, taking 10 and 15 minutes."""
    plan = make_plan("npu", ["a_1", "b_2", "c_3", "d_4"], [0, 1], {"a_1": 400.0, "b_2": 300.0, "c_3": 200.0,
                                                                  "d_4": 100.0}, 1)
    label = "manual__2026-11-20T10:00:00+00:00" if airflow else "cli-1"
    key = f"nightly:{SUITE}:{label}"
    meta: dict[str, Any] = {"partition": {"npu": plan.to_dict()}}
    if airflow:
        meta["airflow"] = {"dag_id": f"zlops_nightly_{SUITE}", "run_id": label}
    start = T0 + timedelta(days=19)
    nights.store.upsert_run(RunRecord(key, "nightly", SUITE, sha(19), "main", RunStatus.DONE, False, start,
                                      start + timedelta(hours=1), meta))
    for device, minutes in ((0, 10), (1, 15)):
        outcome = ShardOutcome("npu", device, "ascend", ShardStatus.OK if device == 0 else ShardStatus.FAILED,
                               Path(f"/art/npu/{device}"), 0 if device == 0 else 3, start,
                               start + timedelta(minutes=minutes), error=None if device == 0 else "exit 3\nmore")
        results = [CaseResult(c, "time", "ms", True, (1.0, 1.1)) for c in plan.cases_of(device)] if device == 0 else []
        nights.store.record_shard(key, outcome, results)
    return key, plan


def test_the_run_page_shows_shards_task_logs_and_predicted_vs_realized_per_device(nights: Nights) -> None:
    key, plan = _partitioned_run(nights, airflow=True)
    page = _client(nights).get("/run", params={"key": key})
    assert page.status_code == 200
    text = html.unescape(page.text)
    run_url = "../dags/zlops_nightly_ops/runs/manual__2026-11-20T10%3A00%3A00%2B00%3A00"
    for device, busy, status in ((0, 600.0, "ok"), (1, 900.0, "failed")):
        row = text[text.index(f'id="shard-npu-{device}"'):]
        row = row[:row.index("</tr>")]
        assert f'href="{run_url}/tasks/run_npu_{device}" target="_top">Airflow task log (run_npu_{device})' in row
        assert f'<td class="num">{fmt_duration(plan.loads[device])}</td>' in row  # the plan's prediction
        assert f'<td class="num">{fmt_duration(busy)}</td>' in row and status in row  # what the shard took
        assert f'<td class="num">{len(plan.cases_of(device))}</td>' in row
    assert "exit 3" in text and "more" not in text[text.index('id="shard-npu-1"'):].split("</tr>")[0]
    # the pool line: predicted makespan (the plan's) vs realized (first start to last end)
    assert f"predicted makespan <b>{fmt_duration(plan.makespan)}</b>" in text
    assert f"realized makespan <b>{fmt_duration(900.0)}</b> ({900.0 / plan.makespan:.2f}× the predicted)" in text
    assert "device idle time 5.0 min (17% of the device time the pool held)" in text
    assert f'href="{run_url}" target="_top"' in text


def test_a_run_made_outside_airflow_points_at_its_run_log(nights: Nights) -> None:
    key, _ = _partitioned_run(nights, airflow=False)
    text = html.unescape(_client(nights).get("/run", params={"key": key}).text)
    assert "Airflow task log" not in text and "<code>/art/npu/0/run.log</code>" in text
    one = html.unescape(_client(nights).get("/run", params={"key": run_key(BAD_NIGHT)}).text)
    assert "No plan: every device ran the whole suite, nothing was predicted" in one
    assert "/tasks/run_cuda_0" in one  # a triage night (made by Airflow): one shard per pool


def test_the_coverage_page_lists_a_nights_gaps_with_the_judges_note(nights: Nights) -> None:
    key = run_key(NIGHTS - 1)
    gaps = [Comparison(SUITE, "cuda", case, "time", "ms", True, None, None,
                       Judgement(verdict, None, None, None, f"{case}: {verdict.value} because <reasons>"))
            for case, verdict in (("exp_32", Verdict.UNMEASURABLE), ("log_32", Verdict.INVALID),
                                  ("tanh_16", Verdict.MISSING))]
    nights.store.save_comparisons(key, [*nights.store.comparisons(key), *gaps])
    page = _client(nights).get("/coverage", params={"suite": SUITE})
    assert page.status_code == 200
    text = html.unescape(page.text)
    assert "<b>3 of 9</b> series of this night were not judged" in text and "Pools: 3 ran." in text
    for verdict, n in (("unmeasurable", 1), ("invalid", 1), ("missing", 1), ("failed", 0), ("incomparable", 0)):
        assert f'<h2 id="gap-{verdict}">{verdict}: {n}</h2>' in text
    assert "exp_32: unmeasurable because <reasons>" in text and "&lt;reasons&gt;" in page.text  # escaped
    assert f"series?suite={SUITE}&pool=cuda&case=tanh_16&metric=time" in text
    # the night's coverage per pool, from the one pure function (zlops.judge.coverage), at the run's thresholds
    run = nights.store.get_run(key)
    assert run is not None
    thresholds, judge = run_judging(run, nights.config)
    night = cover.pool_coverage(nights.store.comparisons(key), thresholds, judge=judge)
    shown = re.findall(r"<li>(.*?)</li>", text[text.index('<ul id="coverage-lines">'):text.index("</ul>",
                                                                                  text.index("coverage-lines"))])
    assert shown == cover.pool_lines(night) and len(shown) == 3
    assert shown[0].startswith("cuda: coverage: ") and "not at 5%: invalid 1, missing 1, unmeasurable 1" in shown[0]
    assert '<h3 id="unwatched">Not watched at 5%: 3</h3>' in text
    unwatched = text[text.index('id="unwatched"'):text.index('id="upper-only"')]
    assert [re.findall(r"<td>(\w+)</td><td>time</td><td>([\w ,/]+)</td>", unwatched)] == [
        [("log_32", "invalid"), ("tanh_16", "missing"), ("exp_32", "unmeasurable")]]
    none = _client(nights).get("/coverage", params={"suite": "nosuch"})
    assert none.status_code == 404 and "No compared night" in none.text


def test_the_trust_page_prints_the_ledger_the_digest_posts(nights: Nights) -> None:
    page = _client(nights).get("/trust", params={"days": 60, "suite": SUITE})
    assert page.status_code == 200
    text = html.unescape(page.text)
    lines = ledger_lines(ledger(nights.store, days=60, suite=SUITE))
    shown = re.findall(r"<li>(.*?)</li>", text[text.index('<ul id="ledger">'):])
    assert [re.sub(r"\d\d:\d\d to .*? UTC", "", s) for s in shown[:len(lines)]] == \
        [re.sub(r"\d\d:\d\d to .*? UTC", "", line) for line in lines]
    assert "Alerts opened: 2; confirmed (announced): 2" in text and "waiting for a person: 2" in text
    assert _client(nights).get("/trust", params={"days": 0}).status_code == 422
    assert _client(nights).get("/trust", params={"days": 367}).status_code == 422


def test_the_run_page_shows_each_pool_s_a_b_cost_from_the_one_renderer(nights: Nights) -> None:
    from zlops.report.ab_cost import ab_cost_lines

    key = run_key(NIGHTS - 1)
    meta = {"ab": {"cuda": {"runs": 10, "pairs": 5, "seconds": 151.0, "est_run_s": 14.0, "realised_run_s": 15.1,
                            "est_s": 140.0, "budget_s": 300.0, "budget_basis": "floor 300 s",
                            "outcomes": {"confirmed": 1, "inconclusive": 1}, "suspects": 2, "ab_suspects": 2,
                            "stopped": "budget (300 s) spent"}}}
    nights.store.update_run_meta(key, meta)
    text = html.unescape(_client(nights).get("/run", params={"key": key}).text)
    (line,) = ab_cost_lines(meta)
    assert '<h3 id="ab">A/B confirmation</h3>' in text and f"<li>{line}</li>" in text
    assert "151 s spent, estimated 140 s" in line and "1 inconclusive" in line
