"""zlops digest: the trust ledger of the past week, posted to Slack every Monday (dag id ``zlops_digest``).

One task, one call into zlops (zlops.airflow.tasks.post_digest: the ledger of the 7 days before the
run's schedule point, queued in the outbox and flushed); ``zlops digest --config F`` does the same from
a shell, and the ``/zlops/trust`` page shows the same lines.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from zlops.airflow.tasks import post_digest

with DAG(
    dag_id="zlops_digest",
    description="Post the weekly zlops trust ledger (alerts, time to triage, precision, coverage) to Slack",
    schedule="0 9 * * 1",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["zlops", "slack"],
) as dag:
    post_digest.override(task_id="post_digest")()
