"""A small FastAPI app for the Airflow UI: recent zlops runs, and one run's report and plots.

Mounted by ``plugins/zlops_plugin.py`` at ``/zlops/`` (a "zlops" entry under Browse). Read-only;
it reads the store and the artifacts of the config named by ``ZLOPS_CONFIG``.

Every route, the API docs and the OpenAPI schema included, sits behind Airflow's authentication:
the same FastAPI dependency Airflow's own API routes use (``get_user``: the ``Authorization: Bearer``
JWT, else the UI's ``_token`` cookie, checked by the configured auth manager), so the pages need the
UI's login and answer 401 without it. Run keys (Airflow run ids hold ``+`` and ``:``) are
URL-encoded in every link the pages make.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

from zlops.config import Config, config_from_env

_STYLE = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}pre{background:#f6f6f6;padding:1em}"
          ".regression{color:#b00;font-weight:bold}.potential{color:#c60}.improved{color:#080}")


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>")


def link(route: str, **query: str) -> str:
    """A relative link with its query URL-encoded (``+`` and ``:`` of run keys included) and
    escaped for an HTML attribute."""
    return html.escape(f"{route}?{urlencode(query, quote_via=quote, safe='')}", quote=True)


async def airflow_user(request: Request) -> Any:
    """Airflow's own check of the request: ``get_user`` of ``airflow.api_fastapi.core_api.security``
    (bearer JWT, else the UI's cookie, validated by the auth manager; 401/403 otherwise).

    Imported when the first request arrives, not at plugin load: every Airflow process loads the
    plugins (scheduler, workers, the CLI) and that module costs about 2 s to import.
    """
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    return await get_user(request=request, _oauth_token=None, bearer_credentials=await bearer_scheme(request))


def create_app(config: Config | None = None, *, authenticate: Callable[..., Any] | None = None) -> FastAPI:
    """The app; ``config`` defaults to $ZLOPS_CONFIG, read on each request so edits apply.

    ``authenticate`` is the FastAPI dependency every route needs (default: Airflow's, see the module
    docstring); FastAPI's own docs and schema routes are replaced by ones that need it too.
    """
    auth = Depends(authenticate or airflow_user)
    app = FastAPI(title="zlops", dependencies=[auth], docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(openapi_url=f"{root}/openapi.json", title="zlops API")

    def cfg() -> Config:
        return config if config is not None else config_from_env()

    @app.get("/", response_class=HTMLResponse)
    def index(suite: str | None = None, limit: int = 50) -> str:
        from zlops.pipeline import open_store

        store = open_store(cfg())
        rows = []
        for run in store.list_runs(suite=suite, limit=min(max(limit, 1), 500)):
            counts: dict[str, int] = {}
            for c in store.comparisons(run.run_key):
                counts[c.verdict.value] = counts.get(c.verdict.value, 0) + 1
            verdicts = ", ".join(f"<span class='{k}'>{v} {k}</span>" for k, v in sorted(counts.items()))
            when = run.started_at.isoformat(timespec="minutes") if run.started_at else "-"
            rows.append(f"<tr><td>{when}</td><td>{html.escape(run.suite)}</td><td>{html.escape(run.kind)}</td>"
                        f"<td><code>{run.sha[:12]}</code></td><td>{run.status.value}</td>"
                        f"<td>{'yes' if run.accepted else ''}</td><td>{verdicts}</td>"
                        f"<td><a href='{link('run', key=run.run_key)}'>report</a></td></tr>")
        table = ("<table><tr><th>started</th><th>suite</th><th>kind</th><th>commit</th><th>status</th>"
                 "<th>baseline</th><th>verdicts</th><th></th></tr>" + "".join(rows) + "</table>")
        return _page("zlops runs", table if rows else "<p>No runs yet.</p>")

    @app.get("/run", response_class=HTMLResponse)
    def run_page(key: str) -> str:
        from zlops.pipeline import context_for, open_store

        config = cfg()
        run = open_store(config).get_run(key)
        if run is None:
            raise HTTPException(404, f"unknown run {key!r}")
        ctx = context_for(config, run.suite, run.run_key)
        text = ctx.run_dir / "report.txt"
        body = [(f"<p>suite <b>{html.escape(run.suite)}</b>, commit <code>{run.sha}</code>, "
                 f"status {run.status.value}</p>")]
        body.append(f"<pre>{html.escape(text.read_text())}</pre>" if text.exists() else "<p>No report yet.</p>")
        for png in sorted((ctx.run_dir / "plots").glob("*.png")):
            body.append(f"<p><img src='{link('plot', key=run.run_key, name=png.name)}' "
                        f"alt='{html.escape(png.stem, quote=True)}' width='880'></p>")
        return _page(f"zlops run {run.run_key}", "".join(body))

    @app.get("/plot")
    def plot(key: str, name: str) -> Any:
        from zlops.pipeline import context_for, open_store

        config = cfg()
        run = open_store(config).get_run(key)
        if run is None:
            raise HTTPException(404, "unknown run")
        plots = (context_for(config, run.suite, run.run_key).run_dir / "plots").resolve()
        path = (plots / name).resolve()
        if path.parent != plots or path.suffix != ".png" or not path.is_file():
            raise HTTPException(404, "no such plot")
        return FileResponse(Path(path), media_type="image/png")

    return app
