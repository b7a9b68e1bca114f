"""Links between an Airflow DAG run and its zlops report, both ways.

Airflow -> zlops: :class:`ZlopsReportLink`, a global operator extra link ("zlops report") that the
plugin registers, on every task of a ``zlops_nightly_<suite>`` DAG run; and the plugin's "zlops report"
tab on every DAG run page (an external view with ``destination: dag_run``). Both open
``/zlops/airflow-run?dag_id=...&run_id=...``, which finds the zlops run of that DAG run.
zlops -> Airflow: the fetch task keeps ``{"airflow": {"dag_id", "run_id"}}`` in the run's meta
(:func:`airflow_meta`), and the runs list and the report link to the DAG run's page
(:func:`zlops.airflow.ui.airflow_run_url`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from airflow.sdk import BaseOperatorLink

from zlops.airflow.ui import NIGHTLY_DAG_PREFIX

#: The external view's href: Airflow fills {DAG_ID} and {RUN_ID} (url-encoded) on a DAG run page.
RUN_TAB_HREF = "zlops/airflow-run?dag_id={DAG_ID}&run_id={RUN_ID}"


def report_url(dag_id: str, run_id: str, *, base_url: str | None = None) -> str:
    """Where the zlops report of a DAG run is: ``<base>/zlops/airflow-run?...`` (an absolute path without
    ``[api] base_url``)."""
    query = urlencode({"dag_id": dag_id, "run_id": run_id}, quote_via=quote, safe="")
    return f"{(base_url or '').rstrip('/')}/zlops/airflow-run?{query}"


def airflow_meta(dag_id: str, run_id: str) -> dict[str, Any]:
    """What the fetch task keeps in the zlops run's meta, so the zlops pages can link back."""
    return {"airflow": {"dag_id": dag_id, "run_id": run_id}}


class ZlopsReportLink(BaseOperatorLink):
    """"zlops report" on the tasks of a zlops nightly DAG run (empty, so hidden, on any other DAG)."""

    name = "zlops report"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        if not str(ti_key.dag_id).startswith(NIGHTLY_DAG_PREFIX):
            return ""
        from airflow.configuration import conf

        return report_url(ti_key.dag_id, ti_key.run_id, base_url=conf.get("api", "base_url", fallback=None))
