"""The night routes of the zlops pages: the cross-backend matrix, a night's coverage, the trust ledger.

``GET /matrix?suite=S[&run=KEY]``: the op family x pool grid of a night's stored changes
(:func:`zlops.triage.night.matrix_view`), a plotly heatmap (a click opens the worst case's series) and the
same grid as a table whose cells link to the series and all-backends pages.
``GET /coverage?suite=S[&run=KEY]``: the night's coverage per pool (the share of series watched at both
thresholds, why each other series is not, a pool's fall against the previous night), its unmeasurable, invalid,
missing, failed and incomparable series and the pools that did not run (:func:`zlops.triage.night.coverage_view`).
``GET /trust[?suite=S][&days=7]``: the trust ledger (:func:`zlops.triage.trust.ledger`), as the weekly digest
posts it. Every number is a stored one or a count of stored rows shown beside it.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from zlops.airflow.bounds import SUITE, text, whole

_KEY = text(250, what="a run key")


def add_night_routes(app: FastAPI, pages: Any) -> None:
    """Register the matrix, coverage and trust pages on ``app``."""
    from zlops.airflow.web import link

    def pick_suite(suite: str | None) -> tuple[str, list[str]]:
        names = sorted(pages.config.suites)
        if suite:
            return suite, names
        if not names:
            raise HTTPException(404, "the config has no suites")
        return names[0], names

    @app.get("/matrix", response_class=HTMLResponse)
    def matrix_page(request: Request, suite: str | None = Query(None, **SUITE),
                    run: str | None = Query(None, **_KEY)) -> HTMLResponse:
        from zlops.airflow.charts import matrix_figure
        from zlops.triage.night import matrix_view

        name, suites = pick_suite(suite)
        view = matrix_view(pages.store(), name, run_key=run or None)
        links = {(row.family, pool): link("series", suite=name, pool=pool, case=cell.worst.case,
                                          metric=cell.worst.metric)
                 for row in view.rows for pool, cell in row.cells.items() if cell.worst is not None}
        return pages.render(request, "matrix.html", title=f"{name}: op family × pool", view=view, suites=suites,
                            figure=matrix_figure(view, links), links=links, status_code=200 if view.run else 404)

    @app.get("/coverage", response_class=HTMLResponse)
    def coverage_page(request: Request, suite: str | None = Query(None, **SUITE),
                      run: str | None = Query(None, **_KEY)) -> HTMLResponse:
        from zlops.triage.night import coverage_view

        name, suites = pick_suite(suite)
        configured = pages.config.suites.get(name)
        view = coverage_view(pages.store(), name, run_key=run or None,
                             expected_pools=list(configured.pools) if configured is not None else None,
                             config=pages.config)
        return pages.render(request, "coverage.html", title=f"{name}: coverage of a night", view=view, suites=suites,
                            status_code=200 if view.run else 404)

    @app.get("/trust", response_class=HTMLResponse)
    def trust_page(request: Request, suite: str | None = Query(None, **SUITE),
                   days: int = Query(7, **whole(1, 366))) -> HTMLResponse:
        from zlops.triage.trust import ledger, ledger_lines

        led = ledger(pages.store(), days=days, suite=suite or None)
        return pages.render(request, "trust.html", title="zlops trust ledger", led=led, lines=ledger_lines(led),
                            suites=sorted(pages.config.suites), days=days)
