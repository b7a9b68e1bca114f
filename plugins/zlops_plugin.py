"""Airflow plugin: the zlops pages inside the Airflow UI, behind its login.

Served by the api-server at /zlops/: under Browse, "zlops runs" (runs and reports) and "zlops alerts"
(the triage inbox: ack, expected, false positive, wontfix; series and cross-backend charts), "zlops matrix"
(tonight's op family x pool grid) and "zlops trust" (coverage and the trust ledger); on every
DAG run page a "zlops report" tab; on every task of a zlops nightly run a "zlops report" extra link.
At /zlops-forge/github and /zlops-forge/gitlab: the forge's webhook receiver (docs/forge.md).
See zlops.airflow.ui, zlops.airflow.links and zlops.airflow.forge.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from zlops.airflow.forge import URL_PREFIX as FORGE_URL_PREFIX
from zlops.airflow.forge import create_forge_app
from zlops.airflow.links import RUN_TAB_HREF, ZlopsReportLink
from zlops.airflow.params import TriggerParamErrors
from zlops.airflow.ui import URL_PREFIX, create_app


class ZlopsPlugin(AirflowPlugin):
    name = "zlops"
    # AirflowPlugin declares these as plain class attributes
    fastapi_apps = [  # noqa: RUF012
        {"app": create_app(), "url_prefix": URL_PREFIX, "name": "zlops"},
        # the forge's webhooks (/zlops compare on a PR): public routes, authenticated by their signature
        {"app": create_forge_app(), "url_prefix": FORGE_URL_PREFIX, "name": "zlops forge webhooks"},
    ]
    # a refused trigger param of a zlops DAG answers with one sentence, not jsonschema's dump
    fastapi_root_middlewares = [  # noqa: RUF012
        {"middleware": TriggerParamErrors, "args": [], "kwargs": {}, "name": "zlops trigger param errors"},
    ]
    external_views = [  # noqa: RUF012
        {"name": "zlops runs", "href": "zlops/", "destination": "nav", "category": "browse", "url_route": "zlops"},
        {"name": "zlops alerts", "href": "zlops/alerts", "destination": "nav", "category": "browse",
         "url_route": "zlops-alerts"},
        {"name": "zlops matrix", "href": "zlops/matrix", "destination": "nav", "category": "browse",
         "url_route": "zlops-matrix"},
        {"name": "zlops trust", "href": "zlops/trust", "destination": "nav", "category": "browse",
         "url_route": "zlops-trust"},
        {"name": "zlops report", "href": RUN_TAB_HREF, "destination": "dag_run", "url_route": "zlops-report"},
    ]
    global_operator_extra_links = [ZlopsReportLink()]  # noqa: RUF012
