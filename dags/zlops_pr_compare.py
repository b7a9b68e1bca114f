"""zlops PR compare: a manual trigger that compares a branch (or pull/N/head, or a SHA) with its
merge-base on the suite's main branch, on the same devices. No schedule.

validate (unknown conf keys and unsafe refs refused before any git command) -> compare (single or
compare mode, the seed's device plan, caliber check, judge, report to markdown and Slack). The
repository always comes from $ZLOPS_CONFIG, never from the trigger. Devices are protected by zlops'
host-local device locks, which the nightly's device tasks hold too.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from zlops.airflow.pr_tasks import compare, validate
from zlops.config import config_from_env
from zlops.prcompare import MAX_PAIRS, MAX_ROUNDS, REF_PATTERN

config = config_from_env()
suites = sorted(config.suites)

with DAG(
    dag_id="zlops_pr_compare",
    description="Compare a PR branch with its merge-base on main (zlops)",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["zlops", "pr"],
    params={
        "suite": Param(suites[0], type="string", enum=suites, title="Suite"),
        "ref": Param("main", type="string", pattern=REF_PATTERN, minLength=1, maxLength=200, title="Ref",
                     description="Branch name, pull/N/head or commit SHA of the suite's repository"),
        "devices": Param(None, type=["null", "array"], items={"type": "integer", "minimum": 0}, maxItems=8,
                         title="Devices", description="Device indices; empty: idle devices are picked"),
        "rounds": Param(None, type=["null", "integer"], minimum=1, maximum=MAX_ROUNDS, title="Rounds"),
        "pairs": Param(1, type="integer", minimum=1, maximum=MAX_PAIRS, title="Interleaved pairs",
                       description="Base/HEAD pairs on one device (>= 7 lets the noise judge confirm by A/B)"),
        "variants": Param(None, type=["null", "array"], items={"type": "string"}, title="Variants / runtimes"),
        "pool": Param(None, type=["null", "string"], title="Pool", description="Default: the suite's first pool"),
    },
) as dag:
    compare.override(task_id="compare")(validate.override(task_id="validate")())
