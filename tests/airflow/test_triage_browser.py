"""The triage pages in a real browser: Debian's chromium, driven by Playwright's Python API, against Airflow's own
api-server app (the zlops plugin from plugins/, SimpleAuthManager) served over HTTP on 127.0.0.1.

A person's morning: open a link to the alerts inbox signed out, sign in on the Airflow login form it lands on
and come back to that link, ack an alert with a note and see the inbox say so (and the store record it as that
user), open its series page and see plotly draw every raw sample of every night, open the op family x pool
matrix and the all-backends page and see them drawn (a legend naming the bars' colours), click a matrix cell
through to that case's series, and click the run page's regression row through to its series. No browser is
downloaded: Playwright launches the system's chromium (``executable_path``); where it is absent the test is
skipped with the reason (``.ci/run`` installs it with apt where it can).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("airflow")
pytest.importorskip("plotly")
pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra)")

from db_templates import Templates
from playwright import sync_api as playwright_api
from triage_nights import BAD_NIGHT, NIGHTS, SUITE, Nights, copy_nights, run_key

from zlops.alerts.lifecycle import AlertState

pytestmark = [pytest.mark.airflow, pytest.mark.slow]

PASSWORD = "zlops-browser-password"
SAMPLES_PER_NIGHT = 5  # tests/triage_nights.py: 5 raw samples per night, one device per pool


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run does it where it can)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def nights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db_templates: Templates) -> Nights:
    stored = copy_nights(tmp_path, db_templates)
    monkeypatch.setenv("ZLOPS_CONFIG", str(stored.config_path))
    return stored


@pytest.fixture
def airflow_url(nights: Nights) -> Iterator[str]:
    """Airflow's api-server app (UI, login, REST API, plugins) served by uvicorn on a free loopback port."""
    import uvicorn
    from airflow.utils import db

    db.resetdb()  # the auth manager checks tokens against the revoked_token table
    home = Path(os.environ["AIRFLOW_HOME"])
    saved = {k: os.environ.get(k)
             for k in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS")}
    os.environ["AIRFLOW__API_AUTH__JWT_SECRET"] = secrets.token_hex(64)
    os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = "admin:admin"
    (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": PASSWORD}))
    from airflow.api_fastapi.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the api-server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_a_sheriff_signs_in_acks_an_alert_and_reads_the_charts(browser: Any, airflow_url: str, nights: Nights,
                                                              tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(30_000)
    try:
        # a deep link opened signed out (from Slack): Airflow's own login form, the link kept as its next
        deep = f"/zlops/alerts?suite={SUITE}"
        page.goto(f"{airflow_url}{deep}")
        page.wait_for_selector("input[name=username]")  # the login form itself, not a URL the login page shares
        assert "softmax" not in page.content() and "Not authenticated" not in page.content()
        assert parse_qs(urlsplit(page.url).query)["next"] == [deep]
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        alert_id = nights.alerts["npu"]
        # wait for the inbox itself (a row only it has): the login page's own URL holds "/zlops/alerts" too
        page.wait_for_selector(f"#alert-{alert_id} td.state")
        assert urlsplit(page.url).path + "?" + urlsplit(page.url).query == deep
        row = page.locator(f"#alert-{alert_id}")
        assert row.locator("td.state").inner_text() == "confirmed"
        assert "admin" in page.locator("p.muted").first.inner_text()  # signed in as

        # ack it with a note: the page comes back saying so, the row shows the new state and its owner
        row.locator("select[name=action]").select_option("ack")
        row.locator("input[name=note]").fill("bisecting from the browser")
        row.locator("button[type=submit]").click()
        page.wait_for_selector(".flash")
        assert f"changed={alert_id}" in page.url
        assert page.locator(".flash").inner_text() == f"alert #{alert_id} npu / softmax_8192 (time) is now acked"
        row = page.locator(f"#alert-{alert_id}")
        assert row.locator("td.state").inner_text() == "acked"
        assert "admin" in row.inner_text() and "bisecting from the browser" in row.inner_text()
        assert nights.store.alert(alert_id).state is AlertState.ACKED
        last = nights.store.alert_events(alert_id)[-1]
        assert (last["actor"], last["to_state"], last["note"]) == ("admin", "acked", "bisecting from the browser")

        # the series page: plotly drew each night's raw-sample distribution (box + every sample)
        row.get_by_role("link", name="softmax_8192").click()
        page.wait_for_url("**/zlops/series?**")
        page.wait_for_selector("#chart .main-svg g.trace.boxes")
        boxes = page.locator("#chart g.trace.boxes")
        assert boxes.count() >= 2  # one box trace per verdict group (not compared, unchanged, regression)
        assert page.locator("#chart g.trace.boxes path.box").count() == NIGHTS  # one box per night
        assert page.locator("#chart g.trace.boxes path.point").count() == NIGHTS * SAMPLES_PER_NIGHT
        assert page.locator("#chart .annotation-text", has_text="level + first bad").count() == 1
        page.screenshot(path=str(tmp_path / "series.png"), full_page=True)

        # the op family x pool matrix of the bad night: the heatmap and the grid
        page.goto(f"{airflow_url}/zlops/matrix?suite={SUITE}&run={run_key(BAD_NIGHT).replace('+', '%2B')}")
        page.wait_for_selector("#chart g.hm image")
        assert page.locator("#chart .xtick text").all_text_contents() == ["cuda", "musa", "npu"]
        assert sorted(page.locator("#chart .ytick text").all_text_contents()) == ["matmul", "softmax"]
        assert "2 of 3 pools: musa, npu" in page.locator("table.matrix").inner_text()
        assert "regression" in page.locator('td[data-family="softmax"][data-pool="npu"]').inner_text()
        page.screenshot(path=str(tmp_path / "matrix.png"), full_page=True)
        # a click on the softmax x musa cell opens that case's series on musa
        box = page.locator("#chart .nsewdrag").first.bounding_box()
        assert box is not None
        page.mouse.click(box["x"] + box["width"] * (1.5 / 3), box["y"] + box["height"] * (0.5 / 2))
        page.wait_for_url("**/zlops/series?suite=ops&pool=musa&case=softmax_8192&metric=time")
        page.wait_for_selector("#chart g.trace.boxes")

        # the all-backends page of the case: one panel of bars per pool, a legend naming each bar colour
        page.goto(f"{airflow_url}/zlops/cross?suite={SUITE}&case=softmax_8192&metric=time")
        page.wait_for_selector("#chart g.trace.bars")
        assert page.locator("#chart g.trace.bars path").count() == 3 * (NIGHTS - 1)  # a bar per pool and night
        legend = page.locator("#chart .legend .legendtext").all_text_contents()
        assert sorted(legend) == ["regression", "the pool's threshold (shaded)", "unchanged"]

        # the run page of the bad night: its flagged row is a link through to that series
        page.goto(f"{airflow_url}/zlops/run?key={run_key(BAD_NIGHT).replace('+', '%2B')}")
        npu = page.locator('table.comparison[data-pool="npu"] tr.regression')
        assert npu.locator("td.num").all_text_contents()[3].startswith("+")
        npu.get_by_role("link", name="softmax_8192").click()
        page.wait_for_selector("#chart g.trace.boxes")
        assert "pool=npu" in page.url and "case=softmax_8192" in page.url
        assert errors == []
    finally:
        context.close()
