"""The triage routes of the zlops pages: the alerts inbox and its actions, the series and cross-backend charts.

``GET /alerts`` lists the open alerts grouped as the Slack summary groups them (:func:`zlops.triage.actions.inbox`).
``POST /alerts/{id}`` (form: ``action`` ack | expected | false-positive | wontfix, ``note``, ``csrf_token``)
changes one with :func:`zlops.triage.actions.change_alert`, the very call ``zlops alert ack`` makes: the change is
recorded as the signed-in Airflow user (from Airflow's authentication, never from the form) and its reply
is queued in the alert's Slack thread in the same transaction; with a Slack token in the api-server's
environment the outbox is flushed after the answer, else the ``zlops_outbox`` DAG sends it. A browser is
redirected back to the inbox (303); a client that asks for JSON gets the change as JSON. Retrying the same
change answers the recorded one and queues nothing more.

``GET /series`` and ``GET /cross`` draw :mod:`zlops.triage.series` values with plotly (:mod:`.charts`);
``GET /static/plotly.min.js`` serves the plotly.js bundle of the plotly package, behind the same login.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from fastapi import BackgroundTasks, Depends, FastAPI, Form, HTTPException, Path, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from zlops.airflow.bounds import (
    CASE,
    MAX_ID,
    METRIC,
    POOL,
    SUITE,
    choice,
    flag,
    hex_token,
    name_type,
    names,
    text,
    whole,
)
from zlops.alerts.lifecycle import OPEN_STATES, AlertError, AlertState
from zlops.triage.actions import ACTIONS, MAX_NOTE_CHARS
from zlops.triage.series import MAX_NIGHTS

#: the most pools the cross-backend page draws, and their names' length
MAX_POOLS, POOL_CHARS = 50, 100
PoolName = name_type(POOL_CHARS)
_POOLS = names(MAX_POOLS, POOL_CHARS)
_REQUIRED_SUITE = text(200, min_length=1, what="a suite name")


@lru_cache(maxsize=1)
def plotly_js() -> bytes:
    """The plotly.js bundle the plotly package ships (its offline copy)."""
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs()).encode()


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def flush_outbox_now(config: Any) -> None:
    """Send what the outbox holds when this process has a Slack token (else the zlops_outbox DAG will)."""
    from zlops.slack.outbox import client_for, flush_outbox
    from zlops.steps.context import open_store

    client = client_for(config.slack)
    if client is not None:
        flush_outbox(open_store(config), client)


def add_triage_routes(app: FastAPI, pages: Any, *, user_dep: Callable[..., Any],
                      authorize: Callable[[Any, str], bool]) -> None:
    """Register the inbox, its action, the series and cross-backend pages and the plotly bundle on ``app``."""
    from zlops.airflow.web import check_csrf, csrf_token, link, user_name

    @app.get("/alerts", response_class=HTMLResponse)
    def alerts_page(request: Request, user: Any = Depends(user_dep), suite: str | None = Query(None, **SUITE),
                    all: bool = Query(False, **flag()),
                    changed: int | None = Query(None, **whole(1, MAX_ID))) -> HTMLResponse:
        from zlops.triage.actions import inbox

        store = pages.store()
        groups = inbox(store, suite=suite or None, states=list(AlertState) if all else OPEN_STATES,
                       config=pages.config)
        flash = None
        if changed is not None:
            try:
                a = store.alert(changed)
                flash = f"alert #{a.id} {a.pool} / {a.case} ({a.metric}) is now {a.state.value}"
            except AlertError:
                flash = None
        return pages.render(request, "alerts.html", title="zlops alerts", groups=groups, suite=suite, show_all=all,
                            user=user_name(user), csrf=csrf_token(request), actions=list(ACTIONS),
                            max_note=MAX_NOTE_CHARS, flash=flash)

    @app.post("/alerts/{alert_id}")
    def act(request: Request, background: BackgroundTasks, user: Any = Depends(user_dep),
            alert_id: int = Path(..., **whole(1, MAX_ID)),
            action: str = Form(..., **choice(list(ACTIONS))),
            note: str = Form("", max_length=MAX_NOTE_CHARS,
                             description=f"text of at most {MAX_NOTE_CHARS:,} characters (newlines and tabs, "
                                         "no other control characters)"),
            csrf_token: str = Form("", **hex_token(128))) -> Response:
        from zlops.triage.actions import action_state, change_alert, clean_note

        check_csrf(request, csrf_token)
        store = pages.store()
        try:
            to = action_state(action)
            note = clean_note(note)
            alert = store.alert(alert_id)
        except AlertError as exc:
            raise HTTPException(404 if "unknown alert" in str(exc) else 422, str(exc)) from exc
        if not authorize(user, alert.suite):
            raise HTTPException(403, f"you may not triage the alerts of {alert.suite} "
                                     f"(it needs edit access to the zlops_nightly_{alert.suite} DAG)")
        try:
            done = change_alert(store, alert_id, to, note=note, actor=user_name(user))
        except AlertError as exc:
            if _wants_json(request):
                return JSONResponse({"detail": str(exc)}, status_code=409)
            return pages.render(request, "message.html", title="zlops alerts", css="error", message=str(exc),
                                back=link("../alerts", suite=alert.suite), status_code=409)
        if done.reply_id is not None and not done.repeated:
            background.add_task(flush_outbox_now, pages.config)
        if _wants_json(request):
            return JSONResponse({"alert": done.after.id, "from": done.before.state.value,
                                 "state": done.after.state.value, "actor": user_name(user), "event_id": done.event_id,
                                 "reply_id": done.reply_id, "repeated": done.repeated})
        return RedirectResponse(link("../alerts", changed=done.after.id) + f"#alert-{done.after.id}", status_code=303)

    @app.get("/series", response_class=HTMLResponse)
    def series_page(request: Request, suite: str = Query(..., **_REQUIRED_SUITE), pool: str = Query(..., **POOL),
                    case: str = Query(..., **CASE), metric: str = Query(..., **METRIC),
                    nights: int = Query(30, **whole(1, MAX_NIGHTS))) -> HTMLResponse:
        from zlops.airflow.charts import night_label, series_figure
        from zlops.bisect.messages import alert_culprit_block
        from zlops.triage.series import series_view

        store = pages.store()
        view = series_view(store, suite, pool, case, metric, nights=nights)
        culprit = alert_culprit_block(store, view.alert.id) if view.alert is not None else ""
        kernels = None
        if view.alert is not None:
            from zlops.alerts.explain import alert_attribution

            kernels = store.read(alert_attribution, view.alert, pages.config).text
        return pages.render(request, "series.html", title=f"{pool} / {case} ({metric})", view=view, nights=nights,
                            culprit_html=culprit, kernels=kernels,
                            max_nights=MAX_NIGHTS, figure=series_figure(view), label=night_label,
                            status_code=200 if view.nights else 404)

    @app.get("/cross", response_class=HTMLResponse)
    def cross_page(request: Request, suite: str = Query(..., **_REQUIRED_SUITE), case: str = Query(..., **CASE),
                   metric: str = Query(..., **METRIC), nights: int = Query(14, **whole(1, MAX_NIGHTS)),
                   pool: list[PoolName] | None = Query(None, **_POOLS)) -> HTMLResponse:
        from zlops.airflow.charts import cross_figure, night_label
        from zlops.triage.series import cross_view

        view = cross_view(pages.store(), suite, case, metric, nights=nights, pools=pool or None)
        return pages.render(request, "cross.html", title=f"{case} ({metric}) across backends", view=view,
                            nights=nights, figure=cross_figure(view), label=night_label,
                            status_code=200 if view.pools else 404)

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_bundle() -> Response:
        return Response(plotly_js(), media_type="text/javascript",
                        headers={"Cache-Control": "private, max-age=86400"})
