"""The bisection's Airflow tasks: the nightly's request (an Asset event) and the zlops_bisect DAG's task.

``request_bisect`` runs after the nightly's report step: it names the alerts the report confirmed
over a range of more than one commit (and open alerts whose bisection is paused) in the extra of an
event on :data:`BISECT_REQUESTS`, or is skipped (no event) when there are none or ``bisect.auto`` is
off. The ``zlops_bisect`` DAG is scheduled on that asset; its task bisects every alert of the events
that triggered it, plus the ``alert_id`` param of a manual trigger. Each body is one call into
:mod:`zlops.bisect.run`; ids from events and params are validated there.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.sdk import Asset, get_current_context, task

log = logging.getLogger(__name__)

BISECT_REQUESTS = Asset("zlops://bisect/requests")


@task(outlets=[BISECT_REQUESTS])
def request_bisect(suite: str, *, outlet_events: Any = None) -> dict[str, Any]:
    """Ask the zlops_bisect DAG to bisect tonight's newly confirmed regressions (skipped: none to ask)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from zlops.bisect.run import alerts_to_bisect
    from zlops.config.settings import config_from_env
    from zlops.steps.context import make_run_key

    config = config_from_env()
    if not config.bisect.auto:
        raise AirflowSkipException("bisect.auto is off")
    run_key = make_run_key("nightly", suite, get_current_context()["dag_run"].run_id)
    ids = alerts_to_bisect(config, run_key)
    if not ids:
        raise AirflowSkipException("no confirmed regression over more than one commit to bisect")
    outlet_events[BISECT_REQUESTS].extra = {"suite": suite, "run_key": run_key, "alert_ids": ids}
    return {"alert_ids": ids}


@task(retries=2, retry_delay=timedelta(minutes=5))
def bisect(*, triggering_asset_events: Any = None) -> dict[str, Any]:
    """Bisect the requested alerts one after another (a retry resumes from the stored steps)."""
    from zlops.bisect.run import ids_from_events, run_requests, validate_alert_id
    from zlops.config.settings import config_from_env

    params = get_current_context()["params"] or {}
    ids = ids_from_events(triggering_asset_events)
    if params.get("alert_id") is not None:
        ids.append(validate_alert_id(params["alert_id"]))
    if not ids:
        log.info("nothing requested")
        return {}
    return run_requests(config_from_env(), sorted(set(ids)))
