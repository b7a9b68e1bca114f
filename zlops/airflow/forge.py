"""Airflow glue of zlops.forge: the token and webhook secret from a connection, the DAG trigger, and
the receiver app the zlops plugin mounts at ``/zlops-forge`` of the api-server.

The connection (``forge.conn_id``, default ``zlops_forge``): password = the API token, extra
``webhook_secret`` = the webhook's secret, e.g.
``AIRFLOW_CONN_ZLOPS_FORGE='{"conn_type": "http", "password": "ghp_...", "extra": {"webhook_secret": "..."}}'``.
Without the connection the environment variables of the forge section are used (zlops.forge.deliver).
"""

from __future__ import annotations

import logging
from typing import Any

from zlops.config.settings import ForgeConfig
from zlops.forge.deliver import ForgeSecrets, env_secrets

log = logging.getLogger(__name__)

DAG_ID = "zlops_pr_compare"
#: where the plugin mounts the receiver: POST /zlops-forge/github, /zlops-forge/gitlab
URL_PREFIX = "/zlops-forge"


def _connection(conn_id: str) -> Any:
    """The connection from a task (task SDK) or from the api-server (the secrets backends), or None."""
    try:
        from airflow.sdk import BaseHook

        return BaseHook.get_connection(conn_id)
    except ImportError:
        return None
    except Exception as exc:  # noqa: BLE001 - AirflowNotFoundException, or no task context (api-server)
        if type(exc).__name__ == "AirflowNotFoundException":
            return None
    try:
        from airflow.models.connection import Connection

        return Connection.get_connection_from_secrets(conn_id)
    except Exception as exc:  # noqa: BLE001 - AirflowNotFoundException and the secrets backends' own errors
        log.info("no Airflow connection %r (%s)", conn_id, type(exc).__name__)
        return None


def connection_secrets(forge: ForgeConfig) -> ForgeSecrets:
    """The token (password) and webhook secret (extra ``webhook_secret``) of ``forge.conn_id``, else the env."""
    conn = _connection(forge.conn_id)
    if conn is None:
        return env_secrets(forge)
    extra = conn.extra_dejson if hasattr(conn, "extra_dejson") else {}
    env = env_secrets(forge)
    return ForgeSecrets((conn.password or "").strip() or env.token,
                        str(extra.get("webhook_secret") or "").strip() or env.webhook_secret)


def trigger_pr_compare(conf: dict[str, Any], run_id: str | None = None) -> str:
    """Trigger ``zlops_pr_compare`` with ``conf`` the way ``airflow dags trigger`` does (Airflow's API
    client; the DAG's params validate the conf again), as run ``run_id`` (the receiver's choice: the checks it
    opened are found again by it); returns the run id."""
    from airflow.api.client import get_current_api_client

    made = get_current_api_client().trigger_dag(dag_id=DAG_ID, run_id=run_id, conf=dict(conf),
                                                triggering_user_name="zlops-forge")
    if not made:
        raise RuntimeError(f"Airflow created no run of {DAG_ID}")
    return str(made["dag_run_id"])


def create_forge_app() -> Any:
    """The receiver for the plugin: the config from $ZLOPS_CONFIG per delivery, Airflow's connections
    and trigger."""
    from zlops.config.settings import config_from_env
    from zlops.forge.lifecycle import AIRFLOW
    from zlops.forge.receiver import create_app

    return create_app(config_from_env, trigger=trigger_pr_compare, secrets=connection_secrets, runner=AIRFLOW)
