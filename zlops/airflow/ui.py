"""The zlops pages inside the Airflow UI: runs and reports, the alerts inbox, series and cross-backend charts.

Mounted by ``plugins/zlops_plugin.py`` at ``/zlops/`` (entries under Browse, and a "zlops report" tab on
every DAG run); it reads the store and the artifacts of the config named by ``ZLOPS_CONFIG``. Pages are
jinja2 templates (``templates/``), charts are plotly (:mod:`zlops.airflow.charts`, plotly.js served
from here: no CDN). The triage routes are in :mod:`zlops.airflow.triage_routes`.

Every route, the API docs and the OpenAPI schema included, sits behind Airflow's authentication:
the same FastAPI dependency Airflow's own API routes use (``get_user``: the ``Authorization: Bearer``
JWT, else the UI's ``_token`` cookie, checked by the configured auth manager), so the pages need the
UI's login and answer 401 without it, except a browser's GET of a page, which is sent (303) to Airflow's
login with the page as ``next`` and comes back to it signed in (:func:`login_redirect`). Changing an alert
also needs Airflow's permission to edit the suite's nightly DAG (403 otherwise) and, for a browser (the
cookie), the page's CSRF token. Run keys
(Airflow run ids hold ``+`` and ``:``) are URL-encoded in every link the pages make. Every parameter is
bounded (:mod:`zlops.airflow.bounds`): a refused one answers 422 with a sentence naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from zlops.airflow import device_task_id
from zlops.airflow.bounds import RUN_KEY, SUITE, text, wants_html, whole
from zlops.airflow.web import COOKIE as COOKIE  # the pages' sign-in cookie, named where the app is
from zlops.airflow.web import link
from zlops.config.settings import Config, config_from_env
from zlops.model import RunRecord, is_canary

#: Where the plugin mounts the pages in Airflow's api-server (plugins/zlops_plugin.py).
URL_PREFIX = "/zlops"
#: Airflow's own route that sends a browser to the auth manager's login page, then to ``next``.
LOGIN_ROUTE = "/api/v2/auth/login"
#: The answers of Airflow's ``get_user`` that mean "sign in (again)", as Airflow's own UI reads them.
_SIGNED_OUT = {401: None, 403: "Invalid JWT token"}
#: DAG id of a suite's nightly (dags/zlops_nightly.py).
NIGHTLY_DAG_PREFIX = "zlops_nightly_"
_AIRFLOW_RUN_ID = re.compile(r"(scheduled|manual|backfill|asset_triggered|dataset_triggered)__.+")


def airflow_run_of(run: RunRecord) -> tuple[str, str] | None:
    """(dag id, DAG run id) of a zlops run made by Airflow: kept in the run's meta by the fetch task, else
    read from a nightly run key whose label is an Airflow run id (runs stored before the meta was kept)."""
    meta = run.meta.get("airflow") if isinstance(run.meta, dict) else None
    if isinstance(meta, dict) and meta.get("dag_id") and meta.get("run_id"):
        return str(meta["dag_id"]), str(meta["run_id"])
    kind, _, rest = run.run_key.partition(":")
    suite, _, label = rest.partition(":")
    if kind == "nightly" and suite == run.suite and _AIRFLOW_RUN_ID.fullmatch(label):
        return NIGHTLY_DAG_PREFIX + run.suite, label
    return None


def airflow_run_url(run: RunRecord) -> str | None:
    """The Airflow UI page of a zlops run's DAG run, relative to the pages (``/zlops/`` -> ``/dags/...``)."""
    found = airflow_run_of(run)
    if found is None:
        return None
    dag_id, run_id = found
    return f"../dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def airflow_task_url(run: RunRecord, task_id: str) -> str | None:
    """The Airflow UI page of one task of a zlops run's DAG run (it opens on the task's log)."""
    base = airflow_run_url(run)
    return None if base is None else f"{base}/tasks/{quote(task_id, safe='')}"


async def airflow_user(request: Request) -> Any:
    """Airflow's own check of the request: ``get_user`` of ``airflow.api_fastapi.core_api.security``
    (bearer JWT, else the UI's cookie, validated by the auth manager; 401/403 otherwise).

    Imported when the first request arrives, not at plugin load: every Airflow process loads the
    plugins (scheduler, workers, the CLI) and that module costs about 2 s to import.
    """
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    return await get_user(request=request, _oauth_token=None, bearer_credentials=await bearer_scheme(request))


def login_redirect(request: Request) -> RedirectResponse | None:
    """Where a signed-out browser asking for a page goes: Airflow's login (``/api/v2/auth/login``, which
    hands over to the auth manager's login page) with the page it asked for as ``next``, so it lands there
    once signed in; None for anything but a browser's GET of a page (an API client keeps its 401).

    The ``next`` is the path and query the browser asked for (a same-site path, which Airflow's
    ``is_safe_url`` and its login page accept); the login route is found from where Airflow mounted the
    pages, so a deployment under a sub-path (``[api] base_url``) keeps its prefix.
    """
    if request.method not in ("GET", "HEAD") or not wants_html(request) or request.headers.get("authorization"):
        return None
    mounted = str(request.scope.get("root_path", "")).rstrip("/")
    airflow_root = mounted[:-len(URL_PREFIX)] if mounted.endswith(URL_PREFIX) else ""
    path = request.url.path
    if mounted and not path.startswith(mounted + "/") and path != mounted:
        path = mounted + path  # a server that keeps the mount out of the path
    asked = path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"{airflow_root}{LOGIN_ROUTE}?{urlencode({'next': asked})}", status_code=303)


def airflow_may_triage(user: Any, suite: str) -> bool:
    """Whether Airflow's auth manager lets ``user`` edit the suite's nightly DAG (what triaging its
    alerts requires: Viewer cannot, User, Op and Admin can with the default roles)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    return bool(get_auth_manager().is_authorized_dag(method="PUT", details=DagDetails(id=NIGHTLY_DAG_PREFIX + suite),
                                                     user=user))


class Pages:
    """What every route needs: the config (read per request, so edits apply), the store, the templates."""

    def __init__(self, config: Config | None) -> None:
        self._config = config

    @property
    def config(self) -> Config:
        return self._config if self._config is not None else config_from_env()

    def store(self) -> Any:
        from zlops.steps.context import open_store

        return open_store(self.config)

    @cached_property
    def env(self) -> Any:
        import jinja2

        from zlops.report import cells

        env = jinja2.Environment(loader=jinja2.PackageLoader("zlops.airflow", "templates"),
                                 autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined)
        from zlops.run.partition import fmt_duration

        env.globals.update(link=link, fmt_value=cells.fmt_value, fmt_change=cells.fmt_change,
                           reference_text=cells.reference_text, reference_name=cells.reference_name,
                           value_name=cells.value_name, base_unit=cells.base_unit, dur=fmt_duration)
        return env

    def render(self, request: Request, template: str, *, status_code: int = 200, **values: Any) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/") + "/"
        return HTMLResponse(self.env.get_template(template).render(root=root, **values), status_code=status_code)


def create_app(config: Config | None = None, *, authenticate: Callable[..., Any] | None = None,
               authorize: Callable[[Any, str], bool] | None = None) -> FastAPI:
    """The app; ``config`` defaults to $ZLOPS_CONFIG, read on each request so edits apply.

    ``authenticate`` is the FastAPI dependency every route needs (default: Airflow's, see the module
    docstring); it returns the user. ``authorize(user, suite)`` says whether the user may triage the
    suite's alerts (default: Airflow's auth manager, :func:`airflow_may_triage`). FastAPI's own docs
    and schema routes are replaced by ones that need the login too.
    """
    from fastapi.exception_handlers import http_exception_handler

    from zlops.airflow import bounds
    from zlops.airflow.night_routes import add_night_routes
    from zlops.airflow.triage_routes import add_triage_routes

    user_dep = authenticate or airflow_user
    app = FastAPI(title="zlops", dependencies=[Depends(user_dep)], docs_url=None, redoc_url=None, openapi_url=None)
    pages = Pages(config)

    async def signed_out(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code in _SIGNED_OUT and _SIGNED_OUT[exc.status_code] in (None, exc.detail):
            to = login_redirect(request)
            if to is not None:
                return to
        return await http_exception_handler(request, exc)

    app.add_exception_handler(StarletteHTTPException, signed_out)
    bounds.install(app, lambda request, sentence: pages.render(
        request, "message.html", title="zlops: a parameter was refused", css="error", message=sentence, back=None,
        status_code=422))

    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(openapi_url=f"{root}/openapi.json", title="zlops API")

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request, suite: str | None = Query(None, **SUITE),
              limit: int = Query(50, **whole(1, 500))) -> HTMLResponse:
        store = pages.store()
        rows = []
        for run in store.list_runs(suite=suite, limit=limit):
            counts: dict[str, int] = {}
            for c in store.comparisons(run.run_key):
                counts[c.verdict.value] = counts.get(c.verdict.value, 0) + 1
            rows.append({"run": run, "counts": sorted(counts.items()), "airflow": airflow_run_url(run),
                         "when": run.started_at.isoformat(timespec="minutes") if run.started_at else "-"})
        return pages.render(request, "runs.html", title="zlops runs", rows=rows)

    def run_page(request: Request, run: RunRecord) -> HTMLResponse:
        from zlops.model import CompareSummary
        from zlops.report import cells
        from zlops.report.ab_cost import ab_cost_lines
        from zlops.report.html import comparison_tables, flagged_items
        from zlops.report.table import caliber_lines
        from zlops.steps.context import context_for
        from zlops.triage.night import run_view

        store = pages.store()
        run_dir = context_for(pages.config, run.suite, run.run_key).run_dir
        text = run_dir / "report.txt"
        found = airflow_run_of(run)
        view = run_view(store, run, airflow=found, task_id=device_task_id)
        # the report's own rows, from the compare rows it was rendered from (zlops.steps.report)
        summary = CompareSummary(run.run_key, run.suite, run.sha, tuple(   # a recall canary: report.txt's own line
            c for c in store.comparisons(run.run_key) if not is_canary(c.case)))
        return pages.render(request, "run.html", title=f"zlops run {run.run_key}", run=run, view=view,
                            airflow=airflow_run_url(run), report=text.read_text() if text.exists() else None,
                            header=cells.header_line(summary, None, None), overall=summary.overall_line(),
                            caliber=caliber_lines(summary.comparisons), flagged=flagged_items(summary),
                            tables=comparison_tables(summary), reasons=cells.reason_lines(summary.comparisons),
                            ab_lines=ab_cost_lines(run.meta),
                            plots=sorted((run_dir / "plots").glob("*.png")),
                            task_url=lambda task_id: airflow_task_url(run, task_id))

    @app.get("/run", response_class=HTMLResponse)
    def run_route(request: Request, key: str = Query(..., **RUN_KEY)) -> HTMLResponse:
        run = pages.store().get_run(key)
        if run is None:
            raise HTTPException(404, f"unknown run {key!r}")
        return run_page(request, run)

    @app.get("/airflow-run", response_class=HTMLResponse)
    def from_airflow(request: Request, dag_id: str = Query(..., **text(250, min_length=1)),
                     run_id: str = Query(..., **text(250, min_length=1))) -> HTMLResponse:
        """The zlops report of an Airflow DAG run (the "zlops report" tab and extra link)."""
        from zlops.errors import ZlopsError
        from zlops.steps.context import make_run_key

        if not dag_id.startswith(NIGHTLY_DAG_PREFIX):
            return pages.render(request, "message.html", title="zlops report", css="muted", back=None,
                                message=f"{dag_id} is not a zlops nightly DAG: it has no zlops report.")
        suite = dag_id[len(NIGHTLY_DAG_PREFIX):]
        try:
            key = make_run_key("nightly", suite, run_id)
        except ZlopsError as exc:
            raise HTTPException(400, str(exc)) from exc
        run = pages.store().get_run(key)
        if run is None:
            return pages.render(request, "message.html", title="zlops report", css="muted", back=None, status_code=404,
                                message=f"No zlops run {key} is stored yet (its fetch task has not run).")
        return run_page(request, run)

    @app.get("/plot")
    def plot(key: str = Query(..., **RUN_KEY), name: str = Query(..., **text(255, min_length=1))) -> Any:
        from zlops.steps.context import context_for

        run = pages.store().get_run(key)
        if run is None:
            raise HTTPException(404, "unknown run")
        plots = (context_for(pages.config, run.suite, run.run_key).run_dir / "plots").resolve()
        path = (plots / name).resolve()
        if path.parent != plots or path.suffix != ".png" or not path.is_file():
            raise HTTPException(404, "no such plot")
        return FileResponse(Path(path), media_type="image/png")

    add_triage_routes(app, pages, user_dep=user_dep, authorize=authorize or airflow_may_triage)
    add_night_routes(app, pages)
    return app
