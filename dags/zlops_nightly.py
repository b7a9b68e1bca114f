"""zlops nightly: one DAG per suite of $ZLOPS_CONFIG (dag id ``zlops_nightly_<suite>``).

fetch -> env -> run per device (one Airflow pool with one slot per device) -> ingest -> compare ->
report -> promote_baseline (only a newer run on the branch line, unless the ``promote`` param says so)
-> cleanup (always). The tasks live in zlops.airflow.tasks; this file only
chooses schedules, params and pools. Create the pools once with ``zlops airflow sync-pools``.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from zlops.airflow.params import nightly_params
from zlops.airflow.tasks import nightly_pipeline
from zlops.config.settings import config_from_env

config = config_from_env()

for suite_name, suite in sorted(config.suites.items()):
    with DAG(
        dag_id=f"zlops_nightly_{suite_name}",
        description=f"zlops nightly of {suite.repo} @ {suite.branch}",
        schedule=suite.schedule,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["zlops", "nightly", suite_name],
        params=nightly_params(),  # sha and promote; their words and refusal sentences: zlops.airflow.params
    ) as dag:
        nightly_pipeline(config, suite_name)
    globals()[dag.dag_id] = dag
