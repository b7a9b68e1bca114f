"""Airflow plugin: the zlops pages (recent runs, reports, trend plots) inside the Airflow UI.

Served by the api-server at /zlops/ and linked under Browse -> zlops runs. See zlops.airflow.ui.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from zlops.airflow.params import TriggerParamErrors
from zlops.airflow.ui import create_app


class ZlopsPlugin(AirflowPlugin):
    name = "zlops"
    # AirflowPlugin declares these as plain class attributes
    fastapi_apps = [{"app": create_app(), "url_prefix": "/zlops", "name": "zlops"}]  # noqa: RUF012
    # a refused trigger param of a zlops DAG answers with one sentence, not jsonschema's dump
    fastapi_root_middlewares = [  # noqa: RUF012
        {"middleware": TriggerParamErrors, "args": [], "kwargs": {}, "name": "zlops trigger param errors"},
    ]
    external_views = [  # noqa: RUF012
        {"name": "zlops runs", "href": "zlops/", "destination": "nav", "category": "browse", "url_route": "zlops"},
    ]
