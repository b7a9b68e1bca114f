"""Under xdist (scripts/test.sh) a ``serial`` test runs with no other test beside it, its module fixture's set-up and
teardown included, and a replay module is serial without a mark (tests/conftest.py): a small suite run on two
workers with this repository's hooks, every test stamping when it ran."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

CONFTEST = f'''
import importlib.util, sys
sys.path.insert(0, {str(TESTS)!r})
spec = importlib.util.spec_from_file_location("zlops_tests_conftest", {str(TESTS / "conftest.py")!r})
hooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hooks)
pytest_runtest_protocol = hooks.pytest_runtest_protocol
pytest_collection_modifyitems = hooks.pytest_collection_modifyitems


def pytest_configure(config):
    config.addinivalue_line("markers", "serial: alone")
'''

STAMP = '''
import json, os, time
def stamp(name, seconds):
    t0 = time.time(); time.sleep(seconds); t1 = time.time()
    with open(os.environ["STAMPS"], "a") as fh:
        fh.write(json.dumps([name, os.environ.get("PYTEST_XDIST_WORKER"), t0, t1]) + "\\n")
'''

FILES = {
    "stamp.py": STAMP,
    "test_a_plain.py": "import pytest\nfrom stamp import stamp\n\n"
                       "@pytest.mark.parametrize('i', range(6))\ndef test_a(i):\n    stamp(f'a{i}', 0.4)\n",
    "test_b_marked.py": "import pytest\nfrom stamp import stamp\npytestmark = pytest.mark.serial\n\n"
                        "@pytest.fixture(scope='module')\ndef built():\n    stamp('b-setup', 0.8)\n    yield\n"
                        "    stamp('b-teardown', 0.3)\n\n"
                        "@pytest.mark.parametrize('i', range(3))\ndef test_b(built, i):\n    stamp(f'b{i}', 0.3)\n",
    "test_c_replay.py": "from stamp import stamp\nTIME_SCALE = 0.05   # a replay at a scaled time: serial, unmarked\n\n"
                        "def test_c():\n    stamp('c0', 0.8)\n",
    "test_d_plain.py": "import pytest\nfrom stamp import stamp\n\n"
                       "@pytest.mark.parametrize('i', range(6))\ndef test_d(i):\n    stamp(f'd{i}', 0.4)\n",
}


@pytest.mark.slow  # two xdist workers start (~10 s)
def test_a_serial_file_and_a_replay_run_with_nothing_beside_them(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    for name, text in FILES.items():
        (suite / name).write_text(text)
    stamps = tmp_path / "stamps.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "loadfile", "-o", "addopts=", str(suite)], capture_output=True, text=True,
                          timeout=300, cwd=suite, env={**_env(), "STAMPS": str(stamps)})
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in stamps.read_text().splitlines()]
    assert len(rows) == 6 + 5 + 1 + 6
    assert {worker for _, worker, _, _ in rows} == {"gw0", "gw1"}  # both workers ran tests
    for group in ("b", "c"):   # b: its fixture's set-up to its teardown; c: the replay
        alone = [r for r in rows if r[0].startswith(group)]
        start, end = min(r[2] for r in alone), max(r[3] for r in alone)
        beside = [r[0] for r in rows if not r[0].startswith(group) and r[2] < end and r[3] > start]
        assert not beside, (group, beside, rows)


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "STAMPS"))}
