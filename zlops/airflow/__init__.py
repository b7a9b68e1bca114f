"""Airflow glue: the only part of zlops that imports Airflow.

:mod:`zlops.airflow.tasks` holds the reusable tasks (fetch, prepare, run one device, ingest,
compare, report, promote, cleanup) and :func:`zlops.airflow.tasks.nightly_pipeline` wires them for
one suite; the DAG files in ``dags/`` only choose schedules, params and pools.

May import: every layer below it (steps, triage, forge, bisect, slack, report, ...); nothing in zlops imports
it but the CLI, and the core imports without Airflow installed (the layers in docs/design/layers.md;
tests/test_layers.py enforces them).
"""

from __future__ import annotations

import re

POOL_PREFIX = "zlops"


def device_pool_name(pool: str, device: int) -> str:
    """The Airflow pool of one device: one slot, so never two benchmark tasks on it at once."""
    return f"{POOL_PREFIX}-{re.sub(r'[^A-Za-z0-9_.-]', '_', pool)}-{int(device)}"


def device_task_id(pool: str, device: int) -> str:
    """The Airflow task id of one device's benchmark in a nightly DAG (the run page links to its log)."""
    return f"run_{pool}_{int(device)}"
