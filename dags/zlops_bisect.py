"""zlops bisect: find the commit behind a confirmed regression (dag id ``zlops_bisect``).

Scheduled on the ``zlops://bisect/requests`` asset, whose events the nightly's ``request_bisect`` task
emits after its report step (the alerts it confirmed over a range of more than one commit); a manual
trigger bisects the ``alert_id`` param. One task, one call into zlops (zlops.airflow.bisect_tasks):
steps are stored as they are decided, so a retry resumes. The benchmark processes hold the device's
host-local lease like the nightly's and yield to a running nightly (docs/bisect.md).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from zlops.airflow.bisect_tasks import BISECT_REQUESTS, bisect

with DAG(
    dag_id="zlops_bisect",
    description="Bisect confirmed regressions: the culprit commit in the alert's thread",
    schedule=[BISECT_REQUESTS],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["zlops", "bisect"],
    params={
        "alert_id": Param(None, type=["null", "integer"], minimum=1, title="Alert",
                          description="Bisect this alert (zlops alert list); empty: the requests of the asset events"),
    },
) as dag:
    bisect.override(task_id="bisect")()
