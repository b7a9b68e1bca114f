"""Session-wide test setup.

Airflow reads its environment at import time, so AIRFLOW_HOME and friends are set here, before
any test module can import airflow (otherwise it would create ~/airflow); nothing imported above
imports it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from db_templates import PgDatabases, Templates, migrated

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


@pytest.fixture(scope="session")
def db_templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Templates]:
    """Databases built once per session and copied per test (tests/db_templates.py)."""
    templates = Templates(tmp_path_factory.mktemp("db-templates"))
    try:
        yield templates
    finally:
        templates.close()


@pytest.fixture
def pg_databases() -> Iterator[PgDatabases]:
    """This test's PostgreSQL databases (empty, or copies of a template), dropped after the test."""
    databases = PgDatabases()
    try:
        yield databases
    finally:
        databases.drop_all()


@pytest.fixture
def pg_url(pg_databases: PgDatabases) -> str:
    """The URL of a fresh, empty PostgreSQL database, dropped after the test."""
    return pg_databases.create()


@pytest.fixture
def migrated_sqlite_url(tmp_path: Path, db_templates: Templates) -> str:
    """The URL of ``tmp_path / "zlops.db"``: this test's copy of a SQLite store migrated once per session."""
    template = db_templates.get("migrated", "sqlite", migrated)
    return db_templates.copy(template, sqlite_path=tmp_path / "zlops.db", pg=None)
