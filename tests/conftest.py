"""Session-wide test setup.

Airflow reads its environment at import time, so AIRFLOW_HOME and friends are set here, before
any test module can import airflow (otherwise it would create ~/airflow); nothing imported above
imports it.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

REPO = Path(__file__).resolve().parents[1]
_AF_HOME = Path(tempfile.mkdtemp(prefix="zlops-af-"))
os.environ.update(
    AIRFLOW_HOME=str(_AF_HOME),
    AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"),
    AIRFLOW__CORE__PLUGINS_FOLDER=str(REPO / "plugins"),
    AIRFLOW__CORE__LOAD_EXAMPLES="False",
    AIRFLOW__CORE__UNIT_TEST_MODE="True",
    AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{_AF_HOME}/airflow.db",
)
os.environ.pop("ZLOPS_CONFIG", None)
# device leases are host-wide by default (/var/lock/zlops): one test session gets its own folder,
# so parallel sessions on one machine do not queue on "cpu:0"; tests of the default unset it
os.environ["ZLOPS_LOCKS_DIR"] = tempfile.mkdtemp(prefix="zlops-locks-")
os.environ.pop("SLACK_BOT_TOKEN", None)

PG_HOST = "127.0.0.1"
PG_PORT = 5432
PG_USER = "postgres"


def pg_admin_connect() -> psycopg.Connection[Any]:
    """An autocommit connection to the admin database; fails (or skips) the test when unreachable."""
    try:
        return psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres",
                               autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        reason = (f"PostgreSQL is not reachable at {PG_USER}@{PG_HOST}:{PG_PORT} ({exc}). "
                  "Start the server, or set ZLOPS_SKIP_POSTGRES=1 to skip the postgres tests.")
        if os.environ.get("ZLOPS_SKIP_POSTGRES") == "1":
            pytest.skip(reason)
        pytest.fail(reason, pytrace=False)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database, dropped after the test."""
    name = f"zlops_test_{secrets.token_hex(6)}"
    with pg_admin_connect() as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield f"postgresql+psycopg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
        finally:
            # engines should be disposed by now; terminate stragglers so DROP cannot hang
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
