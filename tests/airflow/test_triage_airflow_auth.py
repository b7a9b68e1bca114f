"""The triage pages inside Airflow's own api-server: login required, roles enforced, the signed-in user recorded.

Real: Airflow's app (``airflow.api_fastapi.app.create_app``) with the zlops plugin from plugins/, the
SimpleAuthManager with an admin and a viewer, logins through ``POST /auth/token``, the UI's cookie, the
stored nights of tests/airflow/triage_nights.py.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("airflow")
pytest.importorskip("plotly")

from db_templates import Templates
from sqlalchemy import select
from triage_nights import SUITE, Nights, copy_nights

from zlops.alerts.lifecycle import AlertState
from zlops.store.models import Notification

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

PASSWORD = "zlops-triage-password"


@pytest.fixture(scope="module")
def airflow_client() -> Iterator[Any]:
    from airflow.utils import db

    db.resetdb()  # the auth manager checks tokens against the revoked_token table
    home = Path(os.environ["AIRFLOW_HOME"])
    saved = {k: os.environ.get(k)
             for k in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS")}
    os.environ["AIRFLOW__API_AUTH__JWT_SECRET"] = secrets.token_hex(64)
    os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = "admin:admin,vera:viewer"
    (home / "simple_auth_manager_passwords.json.generated").write_text(
        json.dumps({"admin": PASSWORD, "vera": PASSWORD}))
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    try:
        with TestClient(create_app()) as client:
            yield client
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def nights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db_templates: Templates) -> Nights:
    stored = copy_nights(tmp_path, db_templates)
    monkeypatch.setenv("ZLOPS_CONFIG", str(stored.config_path))
    return stored


def _token(client: Any, user: str) -> str:
    answer = client.post("/auth/token", json={"username": user, "password": PASSWORD})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["access_token"])


def _replies(nights: Nights) -> int:
    with nights.store.session() as s:
        return len(s.scalars(select(Notification.id).where(Notification.kind.like("event-%"))).all())


def _csrf(client: Any) -> str:
    page = client.get("/zlops/alerts")
    assert page.status_code == 200, page.text
    (token,) = set(re.findall(r'name="csrf_token" value="([0-9a-f]+)"', page.text))
    return token


def test_every_triage_route_answers_401_without_login(airflow_client: Any, nights: Nights) -> None:
    airflow_client.cookies.clear()
    alert = nights.alerts["npu"]
    for path in ("/zlops/alerts", f"/zlops/series?suite={SUITE}&pool=npu&case=softmax_8192&metric=time",
                 f"/zlops/cross?suite={SUITE}&case=softmax_8192&metric=time", "/zlops/static/plotly.min.js",
                 f"/zlops/airflow-run?dag_id=zlops_nightly_{SUITE}&run_id=x", f"/zlops/matrix?suite={SUITE}",
                 f"/zlops/coverage?suite={SUITE}", "/zlops/trust", f"/zlops/run?key=nightly:{SUITE}:x"):
        answer = airflow_client.get(path)
        assert answer.status_code == 401, (path, answer.status_code)
        assert "softmax" not in answer.text
    answer = airflow_client.post(f"/zlops/alerts/{alert}", data={"action": "ack", "note": "x"})
    assert answer.status_code == 401
    forged = airflow_client.post(f"/zlops/alerts/{alert}", data={"action": "ack"},
                                 headers={"Authorization": "Bearer not-a-jwt"})
    assert forged.status_code in (401, 403)
    assert nights.store.alert(alert).state is AlertState.CONFIRMED and _replies(nights) == 0


def test_a_signed_out_deep_link_goes_to_airflows_login_and_comes_back(airflow_client: Any, nights: Nights) -> None:
    """A link from Slack opened signed out: Airflow's own login route, then the auth manager's login page, each
    with the page asked for as ``next``; signed in, that page (never ``{"detail":"Not authenticated"}``)."""
    from urllib.parse import parse_qs, urlsplit

    airflow_client.cookies.clear()
    deep = f"/zlops/series?suite={SUITE}&pool=npu&case=softmax_8192&metric=time&nights=8"
    browser = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
    first = airflow_client.get(deep, headers=browser, follow_redirects=False)
    assert first.status_code == 303 and "Not authenticated" not in first.text
    to = urlsplit(first.headers["location"])
    assert to.path == "/api/v2/auth/login" and parse_qs(to.query) == {"next": [deep]}
    login = airflow_client.get(first.headers["location"], headers=browser, follow_redirects=False)
    assert login.status_code == 307, login.text  # Airflow checked next (is_safe_url) and hands over
    page = urlsplit(login.headers["location"])
    assert page.path == "/auth/login" and parse_qs(page.query) == {"next": [deep]}
    assert airflow_client.get(login.headers["location"], headers=browser).status_code == 200  # the login form
    airflow_client.cookies.set("_token", _token(airflow_client, "admin"))  # what the login form sets
    try:
        back = airflow_client.get(parse_qs(page.query)["next"][0], headers=browser)
        assert back.status_code == 200 and 'id="chart"' in back.text and "softmax_8192" in back.text
    finally:
        airflow_client.cookies.clear()
    # an API client still gets Airflow's 401, as Airflow's own API answers it
    assert airflow_client.get(deep, headers={"Accept": "application/json"}).status_code == 401


def test_a_viewer_reads_the_pages_but_may_not_triage(airflow_client: Any, nights: Nights) -> None:
    airflow_client.cookies.set("_token", _token(airflow_client, "vera"))
    try:
        series = airflow_client.get("/zlops/series", params={"suite": SUITE, "pool": "npu", "case": "softmax_8192",
                                                             "metric": "time"})
        assert series.status_code == 200 and "/zlops/static/plotly.min.js" in series.text
        answer = airflow_client.post(f"/zlops/alerts/{nights.alerts['npu']}",
                                     data={"action": "ack", "csrf_token": _csrf(airflow_client)})
        assert answer.status_code == 403 and "zlops_nightly_ops" in answer.text
    finally:
        airflow_client.cookies.clear()
    assert nights.store.alert(nights.alerts["npu"]).state is AlertState.CONFIRMED and _replies(nights) == 0


def test_the_ui_login_acks_as_that_user_once(airflow_client: Any, nights: Nights) -> None:
    alert = nights.alerts["npu"]
    airflow_client.cookies.set("_token", _token(airflow_client, "admin"))
    try:
        no_token = airflow_client.post(f"/zlops/alerts/{alert}", data={"action": "ack", "note": "mine"})
        assert no_token.status_code == 403 and "CSRF" in no_token.text  # the cookie alone is not enough
        form = {"action": "ack", "note": "bisecting", "csrf_token": _csrf(airflow_client), "by": "someone-else"}
        for _ in range(2):  # the second is a browser retry: nothing more is recorded or queued
            done = airflow_client.post(f"/zlops/alerts/{alert}", data=form, follow_redirects=False)
            assert done.status_code == 303, done.text
        inbox = airflow_client.get(done.headers["location"].replace("..", "/zlops"))
        assert inbox.status_code == 200 and f"alert #{alert} npu / softmax_8192 (time) is now acked" in inbox.text
    finally:
        airflow_client.cookies.clear()
    events = nights.store.alert_events(alert)
    assert [(e["actor"], e["to_state"], e["note"]) for e in events[1:]] == [("admin", "acked", "bisecting")]
    assert _replies(nights) == 1
    # an API client with a bearer token needs no CSRF token
    api = airflow_client.post(f"/zlops/alerts/{nights.alerts['musa']}", data={"action": "expected", "note": "tiling"},
                              headers={"Authorization": f"Bearer {_token(airflow_client, 'admin')}",
                                       "Accept": "application/json"})
    assert api.status_code == 200 and api.json()["actor"] == "admin" and api.json()["state"] == "expected"


def test_airflow_lists_the_pages_the_run_tab_and_the_extra_link(airflow_client: Any, nights: Nights) -> None:
    plugins = airflow_client.get("/api/v2/plugins",
                                 headers={"Authorization": f"Bearer {_token(airflow_client, 'admin')}"})
    assert plugins.status_code == 200
    (zlops,) = [p for p in plugins.json()["plugins"] if p["name"] == "zlops"]
    views = {v["name"]: v for v in zlops["external_views"]}
    assert views["zlops alerts"]["href"] == "zlops/alerts"
    assert views["zlops matrix"]["href"] == "zlops/matrix" and views["zlops trust"]["href"] == "zlops/trust"
    assert views["zlops report"]["destination"] == "dag_run" and "{RUN_ID}" in views["zlops report"]["href"]
    assert any("ZlopsReportLink" in link for link in zlops["global_operator_extra_links"])
