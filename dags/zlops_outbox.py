"""zlops outbox: send what the Slack outbox holds, every 15 minutes (dag id ``zlops_outbox``).

A Slack outage during a nightly's report step leaves its messages in the store's outbox; this DAG
delivers them between nights instead of the next night's report step. One task, one call into zlops
(zlops.airflow.tasks.flush_outbox); ``zlops alert flush --config F`` does the same from a shell.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from zlops.airflow.tasks import flush_outbox

with DAG(
    dag_id="zlops_outbox",
    description="Send the Slack messages waiting in the zlops outbox",
    schedule="*/15 * * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["zlops", "slack"],
) as dag:
    flush_outbox.override(task_id="flush")()
