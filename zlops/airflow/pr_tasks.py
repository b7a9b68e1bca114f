"""Tasks of the PR-compare DAG: validate the trigger's conf, then run the compare; one call each."""

from __future__ import annotations

from typing import Any

from airflow.sdk import get_current_context, task


def _conf() -> dict[str, Any]:
    """The trigger's conf: the raw keys (unknown ones must be refused), with null params dropped."""
    ctx = get_current_context()
    params = dict(ctx["params"] or {})  # declared keys, validated by Airflow against the form's schema
    raw = dict(ctx["dag_run"].conf or {})
    return {**{k: v for k, v in params.items() if v is not None}, **{k: raw[k] for k in raw if k not in params}}


def _finishing(config: Any, run_id: str) -> Any:
    """Close the checks the forge's receiver opened for this run when the task raises (a timeout too), neutral
    with the reason (zlops.forge.lifecycle): a failed run never leaves a check "running"."""
    from zlops.airflow.forge import connection_secrets
    from zlops.forge.lifecycle import finishing
    from zlops.steps.context import open_store

    return finishing(open_store(config), config, connection_secrets, run_id)


@task
def validate() -> dict[str, Any]:
    """Refuse unknown conf keys and unsafe refs before anything touches git (the form validated types)."""
    from zlops.config.settings import config_from_env
    from zlops.forge.prcompare import validate_request

    config = config_from_env()
    with _finishing(config, get_current_context()["dag_run"].run_id):
        req = validate_request(config, _conf())
    return {"suite": req.suite, "ref": req.ref, "pool": req.pool, "pairs": req.pairs, "variants": list(req.variants)}


@task
def compare(validated: dict[str, Any]) -> dict[str, Any]:
    """Plan (single or compare mode, devices), run both sides, judge, report (markdown + Slack); a compare that
    raises closes its check neutral with the reason."""
    from zlops.airflow.forge import connection_secrets
    from zlops.airflow.tasks import _slack_client
    from zlops.config.settings import config_from_env
    from zlops.forge.prcompare import report, run_compare

    config = config_from_env()
    run_id = get_current_context()["dag_run"].run_id
    with _finishing(config, run_id):
        outcome = run_compare(config, _conf(), label=run_id.replace("+", "_"))
        out = report(config, outcome, slack_client=_slack_client(config), forge_secrets=connection_secrets,
                     forge_run=run_id)
    rows = [c for rows in outcome.comparisons.values() for c in rows]
    return {"mode": outcome.plan.mode, "head": outcome.plan.head_sha, "base": outcome.plan.base_sha,
            "report": str(out.markdown), "slack": out.slack.status,
            "check": None if out.forge is None else {"conclusion": out.forge.check.conclusion,
                                                     "status": out.forge.status},
            "verdicts": {v.value: sum(c.verdict is v for c in rows) for v in {c.verdict for c in rows}}}
