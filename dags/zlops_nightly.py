"""zlops nightly: one DAG per suite of $ZLOPS_CONFIG (dag id ``zlops_nightly_<suite>``).

fetch -> env -> run per device (one Airflow pool with one slot per device) -> ingest -> compare ->
report -> promote_baseline -> cleanup (always). The tasks live in zlops.airflow.tasks; this file only
chooses schedules, params and pools. Create the pools once with ``zlops airflow sync-pools``.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from zlops.airflow.tasks import nightly_pipeline
from zlops.config import config_from_env

SHA_PATTERN = r"^[0-9a-f]{7,64}$"

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
        params={
            "sha": Param(None, type=["null", "string"], pattern=SHA_PATTERN, title="Commit",
                         description="Measure this commit of the branch instead of its head (full or short SHA)"),
        },
    ) as dag:
        nightly_pipeline(config, suite_name)
    globals()[dag.dag_id] = dag
