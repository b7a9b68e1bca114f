"""The CLI starts fast because it imports what a command needs when it runs (issue 23).

Not timed (a shared host's load would make a time bound flaky): each test runs the command's real
code path in a fresh interpreter and checks which modules it loaded. `zlops --help` builds every
parser and loads no store, no config model, no numerical library; `zlops runs` and `zlops alert list`
read a store already at the schema's head with SQLAlchemy and pydantic only: no numpy, scipy,
pandas, matplotlib, Alembic (and its Mako), Airflow or rich. benchmarks/cli_startup.py measures the
times (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

#: never loaded by any of the commands below
HEAVY = ("numpy", "scipy", "pandas", "matplotlib", "alembic", "mako", "airflow", "rich", "jinja2", "psycopg")
#: not loaded to print help either: the store and the config's model
STORE_AND_CONFIG = ("sqlalchemy", "pydantic", "yaml", "zlops.store", "zlops.config.settings", "zlops.triage.actions")

_RUN = """
import json, sys
from zlops.cli import main
codes = []
for argv in {argvs!r}:
    try:
        codes.append(main(argv))
    except SystemExit as exc:
        codes.append(exc.code)
print("@@" + json.dumps({{"codes": codes, "modules": sorted(sys.modules)}}))
"""


def _loaded(argvs: list[list[str]], cwd: Path) -> tuple[list[int], set[str], str]:
    """Run ``zlops ARGV`` for each of ``argvs`` in one fresh interpreter: exit codes, modules loaded, output."""
    done = subprocess.run([sys.executable, "-c", _RUN.format(argvs=argvs)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("@@")), None)
    assert line is not None, done.stderr
    out = json.loads(line[2:])
    return out["codes"], set(out["modules"]), done.stdout + done.stderr


def _present(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if n in modules or any(m.startswith(n + ".") for m in modules))


@pytest.fixture
def store_config(tmp_path: Path) -> Path:
    """A config whose SQLite store exists and is at the schema's head (as after any first command)."""
    from zlops.config.settings import load_config
    from zlops.steps.context import open_store

    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump({
        "home": str(tmp_path / "home"),
        "pools": {"cpu-local": {"backend": "cpu", "devices": [0]}},
        "suites": {"demo-ops": {"repo": str(tmp_path / "up"), "command": ["python", "bench.py", "{results}"],
                                "format": "zlops-json", "pools": ["cpu-local"]}},
    }))
    open_store(load_config(path)).dispose()
    return path


def test_help_loads_neither_the_store_nor_the_config_nor_numerical_libraries(tmp_path: Path) -> None:
    argvs = [["--help"], ["alert", "--help"], ["alert", "ack", "--help"], ["nightly", "--help"], ["parse", "--help"]]
    codes, modules, out = _loaded(argvs, tmp_path)
    assert codes == [0] * len(argvs), out
    assert "usage: zlops" in out
    assert _present(modules, HEAVY + STORE_AND_CONFIG) == []


def test_importing_the_cli_loads_nothing_heavy(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c",
                           "import sys, zlops.cli.app, zlops.__main__; print(sorted(sys.modules))"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    modules = set(eval(done.stdout))  # a list literal of module names
    assert _present(modules, HEAVY + STORE_AND_CONFIG) == []


def test_read_commands_load_sqlalchemy_and_pydantic_only(store_config: Path) -> None:
    argvs = [["--plain", *argv, "--config", str(store_config)] for argv in (["runs"], ["alert", "list", "--all"])]
    codes, modules, out = _loaded(argvs, store_config.parent)
    assert codes == [0, 0], out
    assert "sqlalchemy" in modules and "zlops.config.settings" in modules  # they did read the store
    assert _present(modules, HEAVY) == []


def test_python_dash_m_zlops_is_the_cli(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "zlops", "--version"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("zlops ")
    usage = subprocess.run([sys.executable, "-m", "zlops", "nightly", "--sha", "xyz"], capture_output=True,
                           text=True, timeout=120, cwd=tmp_path)
    assert usage.returncode == 2 and "usage: zlops nightly" in usage.stderr


def test_the_fast_schema_check_agrees_with_alembic() -> None:
    from zlops.store import migrate

    assert migrate.shipped_head() == migrate.head_revision()


def test_a_database_behind_the_head_is_still_migrated(tmp_path: Path) -> None:
    """The fast path only skips Alembic at the shipped head: an older database is upgraded as before."""
    from zlops.store import Store, migrate

    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = Store.open(url, migrate=False)
    migrate.upgrade(old.engine, "0004")
    assert old.current_revision() == "0004" and not migrate.at_shipped_head(old.engine)
    old.dispose()
    store = Store.open(url)
    assert store.current_revision() == migrate.shipped_head() and migrate.at_shipped_head(store.engine)
    store.dispose()
