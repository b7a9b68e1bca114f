"""zlops PR compare: a manual trigger that compares a branch (or pull/N/head, or a SHA) with its
merge-base on the suite's main branch, on the same devices. No schedule.

validate (unknown conf keys and unsafe refs refused before any git command) -> compare (single or
compare mode, the seed's device plan, caliber check, judge, report to markdown and Slack). The
repository always comes from $ZLOPS_CONFIG, never from the trigger. Devices are protected by zlops'
host-local device locks, which the nightly's device tasks hold too.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from zlops.airflow.params import pr_compare_params
from zlops.airflow.pr_tasks import compare, validate
from zlops.config.settings import config_from_env

config = config_from_env()
suites = sorted(config.suites)

with DAG(
    dag_id="zlops_pr_compare",
    description="Compare a PR branch with its merge-base on main (zlops)",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["zlops", "pr"],
    params=pr_compare_params(suites),  # titles, descriptions and refusal sentences: zlops.airflow.params
) as dag:
    compare.override(task_id="compare")(validate.override(task_id="validate")())
