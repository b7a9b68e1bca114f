"""Service faults (issue 14): the database, Slack, re-runs and the Airflow UI, each injected for real.

Every scenario builds what it needs in a temporary folder (a real git upstream, a fresh PostgreSQL
database on 127.0.0.1:5432, the fake Slack Web API on 127.0.0.1, Airflow's own api-server app) and
returns one :class:`Row`: whether zlops survived it as the issue asks (one clear line, no
traceback; the night finished; nothing measured lost), the measurements lost, duplicate result rows,
devices double-booked (always 0 here: these faults never touch the device locks), and a detail.

    .venv/bin/python -m benchmarks.fault_scenarios.services [--only NAME ...] [--json out.json]

Needs PostgreSQL on 127.0.0.1:5432 (trust, user postgres) like the test suite; the UI scenario
needs apache-airflow (``bash scripts/bootstrap.sh airflow,test``).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # the fakes the tests use: fake_upstream, fake_slack

PG = "postgresql+psycopg://postgres@127.0.0.1:5432"
CASES = {"alpha": 1.0, "beta": 2.0, "gamma": 3.0}
ROUNDS = 5


class Row(NamedTuple):
    name: str
    survived: bool
    measurements_lost: int
    duplicate_rows: int
    double_booked: int
    detail: str


# --- helpers ------------------------------------------------------------------------------------

@contextmanager
def _pg_database() -> Iterator[tuple[str, str]]:
    import psycopg

    name = f"zlops_fault_{secrets.token_hex(5)}"
    with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"{PG}/{name}", name
        finally:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')


def _pg_admin(*statements: tuple[str, tuple[Any, ...]]) -> None:
    import psycopg

    with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True) as admin:
        for sql, params in statements:
            admin.execute(sql, params)


def _zlops(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZLOPS_", "SLACK_"))}
    return subprocess.run([sys.executable, "-m", "zlops.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=REPO)


def _one_line(done: subprocess.CompletedProcess[str]) -> tuple[bool, str]:
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("zlops:")]
    ok = done.returncode not in (0, None) and "Traceback" not in done.stderr and len(lines) == 1
    return ok, lines[0] if lines else (done.stderr.strip().splitlines() or ["<nothing>"])[-1]


def _upstream(tmp: Path) -> tuple[Any, str, Path, Path]:
    from fake_upstream import BENCH, Upstream

    up = Upstream(tmp / "upstream")
    (up.path / "bench.py").write_text(
        "import os, time\n"
        "open(os.environ['BENCH_COUNT'], 'a').write('ran\\n')\n"
        "gate = os.environ.get('BENCH_GATE')\n"
        "if gate and not os.path.exists(gate):\n"
        "    open(gate + '.started', 'w').close()\n"
        "    end = time.time() + 60\n"
        "    while not os.path.exists(gate) and time.time() < end: time.sleep(0.05)\n" + BENCH)
    sha = up.commit(CASES)
    return up, sha, tmp / "bench-runs.txt", tmp / "gate"


def _config(tmp: Path, upstream: Path, *, database: str | None = None, gate: Path | None = None,
            count: Path | None = None, slack_url: str | None = None) -> Path:
    import yaml
    from fake_upstream import config_data

    data: dict[str, Any] = config_data(tmp / "home", upstream, database=database)
    data["database_retry_s"] = 2
    data["suites"]["fake"]["env"] = {k: str(v) for k, v in (("BENCH_COUNT", count), ("BENCH_GATE", gate)) if v}
    if slack_url:
        data["slack"] = {"channel": "#perf-nightly", "base_url": slack_url}
    path = tmp / "zlops.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _when_started(gate: Path, fault: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        end = time.monotonic() + 120
        while not Path(str(gate) + ".started").exists() and time.monotonic() < end:
            time.sleep(0.05)
        try:
            fault()
        finally:
            gate.write_text("go")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _stored(cfg: Path, run_key: str) -> tuple[int, int]:
    """(samples stored, duplicate result rows) of a run."""
    from zlops.config.settings import load_config
    from zlops.steps.context import open_store

    rows = open_store(load_config(cfg)).results(run_key)
    keys = [(pool, device, r.case, r.metric) for pool, device, r in rows]
    return sum(len(r.samples) for _, _, r in rows), len(keys) - len(set(keys))


def _runs(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- database -----------------------------------------------------------------------------------

def db_closed_port() -> Row:
    with tempfile.TemporaryDirectory() as d:
        port = _closed_port()
        cfg = _config(Path(d), Path(d), database=f"postgresql+psycopg://zlops:s3cret@127.0.0.1:{port}/zlops")
        ok, line = _one_line(done := _zlops("runs", "--config", str(cfg)))
        ok = ok and "s3cret" not in done.stderr and "connection refused" in line
        return Row("db_closed_port", ok, 0, 0, 0, f"exit {done.returncode}: {line}")


def db_unknown_host() -> Row:
    with tempfile.TemporaryDirectory() as d:
        cfg = _config(Path(d), Path(d), database="postgresql+psycopg://zlops:s3cret@db.invalid:5432/zlops")
        ok, line = _one_line(done := _zlops("runs", "--config", str(cfg)))
        return Row("db_unknown_host", ok and "unknown host" in line, 0, 0, 0, f"exit {done.returncode}: {line}")


def db_sqlite_unusable() -> Row:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "zlops.db").mkdir()  # a folder where the file should be: unusable, even for root
        cfg = _config(Path(d), Path(d), database=f"sqlite:///{d}/zlops.db")
        ok, line = _one_line(done := _zlops("runs", "--config", str(cfg)))
        return Row("db_sqlite_unusable", ok, 0, 0, 0, f"exit {done.returncode}: {line}")


def db_terminated_mid_run() -> Row:
    """``pg_terminate_backend`` of every store connection while the benchmark runs: retried, the night ends."""
    from zlops.config.settings import load_config
    from zlops.steps.nightly import run_nightly

    with tempfile.TemporaryDirectory() as d, _pg_database() as (url, name):
        tmp = Path(d)
        up, sha, count, gate = _upstream(tmp)
        cfg = _config(tmp, up.path, database=url, gate=gate, count=count)
        killed: list[int] = []

        def terminate() -> None:
            import psycopg

            with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True) as a:
                row = a.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s",
                                (name,)).fetchone()
                killed.append(int(row[0]) if row else 0)

        fault = _when_started(gate, terminate)
        try:
            result = run_nightly(load_config(cfg), "fake", sha=sha, run_label="n1")
        except Exception as exc:  # noqa: BLE001 - the scenario reports whatever escaped
            return Row("db_terminated_mid_run", False, len(CASES) * ROUNDS, 0, 0, f"{type(exc).__name__}: {exc}")
        fault.join(5)
        samples, dupes = _stored(cfg, result.run_key)
        lost = len(CASES) * ROUNDS - samples
        ok = result.accepted and lost == 0 and dupes == 0
        return Row("db_terminated_mid_run", ok, lost, dupes, 0,
                   f"{killed[0] if killed else 0} connection(s) terminated mid-benchmark; run accepted: "
                   f"{result.accepted}")


def db_gone_mid_benchmark_then_rerun() -> Row:
    """The database refuses connections from mid-benchmark on; the night ends in one line; a re-run
    with the same run id after it is back ingests the measured shard from its artifacts."""
    with tempfile.TemporaryDirectory() as d, _pg_database() as (url, name):
        tmp = Path(d)
        up, sha, count, gate = _upstream(tmp)
        cfg = _config(tmp, up.path, database=url, gate=gate, count=count)
        fault = _when_started(gate, lambda: _pg_admin(
            (f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false', ()),
            ("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))))
        argv = ("nightly", "--config", str(cfg), "--suite", "fake", "--sha", sha, "--run-id", "n1")
        first = _zlops(*argv)
        fault.join(5)
        _pg_admin((f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true', ()))
        ok1, line = _one_line(first)
        second = _zlops(*argv)
        samples, dupes = _stored(cfg, "nightly:fake:n1")
        lost = len(CASES) * ROUNDS - samples
        ran = _runs(count)
        ok = ok1 and second.returncode == 0 and lost == 0 and dupes == 0 and ran == 1
        return Row("db_gone_mid_benchmark_then_rerun", ok, lost, dupes, 0,
                   f"first: exit {first.returncode}: {line}; rerun: exit {second.returncode}, benchmark ran {ran}x")


# --- re-runs ------------------------------------------------------------------------------------

def rerun_of_an_accepted_run() -> Row:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        up, sha, count, _ = _upstream(tmp)
        cfg = _config(tmp, up.path, count=count)
        argv = ("nightly", "--config", str(cfg), "--suite", "fake", "--sha", sha, "--run-id", "n1")
        first = _zlops(*argv)
        before = _stored(cfg, "nightly:fake:n1")
        refused = _zlops(*argv)
        ok1, line = _one_line(refused)
        after = _stored(cfg, "nightly:fake:n1")
        replaced = _zlops(*argv, "--replace")
        ok = (first.returncode == 0 and ok1 and refused.returncode == 2 and before == after
              and replaced.returncode == 0 and _runs(count) == 2)
        return Row("rerun_of_an_accepted_run", ok, 0, _stored(cfg, "nightly:fake:n1")[1], 0,
                   f"without --replace: exit {refused.returncode}: {line[:90]}...; with it: exit {replaced.returncode}")


# --- Slack --------------------------------------------------------------------------------------

def slack_5xx_once() -> Row:
    from fake_slack import TOKEN, fake_slack_server

    with tempfile.TemporaryDirectory() as d, fake_slack_server() as slack:
        tmp = Path(d)
        up, sha, count, _ = _upstream(tmp)
        cfg = _config(tmp, up.path, count=count, slack_url=slack.url)
        slack.fail("chat.postMessage", 503)
        env = {**os.environ, "SLACK_BOT_TOKEN": TOKEN}
        t0 = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "zlops.cli", "--plain", "nightly", "--config", str(cfg),
                               "--suite", "fake", "--sha", sha, "--run-id", "n1"], capture_output=True, text=True,
                              env=env, timeout=300, cwd=REPO)
        posts = slack.calls("chat.postMessage")
        sent = "slack:  sent" in done.stderr + done.stdout
        delay = posts[1].at - posts[0].at if len(posts) > 1 else float("nan")
        return Row("slack_5xx_once", done.returncode == 0 and sent, 0, 0, 0,
                   f"summary sent within the report step, {delay:.1f} s after the 503 "
                   f"(night {time.monotonic() - t0:.1f} s)")


def slack_down_then_flush() -> Row:
    from fake_slack import TOKEN, fake_slack_server

    from zlops.config.settings import load_config
    from zlops.model import RunRecord, RunStatus
    from zlops.slack.outbox import RETRY_COUNT
    from zlops.steps.context import open_store

    with tempfile.TemporaryDirectory() as d, fake_slack_server() as slack:
        tmp = Path(d)
        cfg = _config(tmp, tmp, slack_url=slack.url)
        store = open_store(load_config(cfg))
        store.upsert_run(RunRecord(run_key="nightly:fake:n1", kind="nightly", suite="fake", sha="a" * 40,
                                   branch="main", status=RunStatus.DONE))
        store.queue_notification("nightly:fake:n1", "summary", "#perf-nightly", {"channel": "#perf-nightly",
                                                                                 "text": "the night's summary"})
        slack.fail("chat.postMessage", 500, times=1 + RETRY_COUNT)
        env = {**os.environ, "SLACK_BOT_TOKEN": TOKEN}
        flush = [sys.executable, "-m", "zlops.cli", "alert", "flush", "--config", str(cfg)]
        down = subprocess.run(flush, capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
        back = subprocess.run(flush, capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
        taken = [p for p in slack.posts()]
        ok = down.returncode == 1 and back.returncode == 0 and store.outbox_items() == [] and len(taken) == 4
        return Row("slack_down_then_flush", ok, 0, 0, 0,
                   f"outage: {down.stdout.strip()}; 15 min later: {back.stdout.strip()}")


# --- Airflow UI ---------------------------------------------------------------------------------

def ui_login_and_encoded_links() -> Row:
    """/zlops/ and its docs and schema without login; then logged in, a run id with '+' and ':'."""
    code = r'''
import html, json, os, re, secrets, sys, tempfile
from pathlib import Path
home = Path(tempfile.mkdtemp())
os.environ.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__PLUGINS_FOLDER=sys.argv[1] + "/plugins",
                  AIRFLOW__CORE__DAGS_FOLDER=sys.argv[1] + "/dags", AIRFLOW__CORE__LOAD_EXAMPLES="False",
                  AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
                  AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_hex(64), ZLOPS_CONFIG=sys.argv[2])
(home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": "pw"}))
from airflow.utils import db
db.resetdb()
from airflow.api_fastapi.app import create_app
from fastapi.testclient import TestClient
c = TestClient(create_app())
anon = {p: c.get(p).status_code for p in ("/zlops/", "/zlops/docs", "/zlops/openapi.json")}
tok = c.post("/auth/token", json={"username": "admin", "password": "pw"}).json()["access_token"]
h = {"Authorization": "Bearer " + tok}
index = c.get("/zlops/", headers=h)
href = html.unescape(re.findall(r"""href=["'](run\?key=[^"']+)["']""", index.text)[0])   # the run's report link
page = c.get("/zlops/" + href, headers=h)
print(json.dumps({"anon": anon, "index": index.status_code, "page": page.status_code, "href": href}))
'''
    from zlops.config.settings import load_config
    from zlops.model import RunRecord, RunStatus
    from zlops.steps.context import open_store

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cfg = _config(tmp, tmp)
        key = "nightly:fake:scheduled__2026-11-30T02:00:00+00:00"
        open_store(load_config(cfg)).upsert_run(RunRecord(run_key=key, kind="nightly", suite="fake",
                                                                   sha="c" * 40, branch="main",
                                                                   status=RunStatus.DONE))
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        done = subprocess.run([sys.executable, "-c", code, str(REPO), str(cfg)], capture_output=True, text=True,
                              env=env, timeout=300, cwd=REPO)
        try:
            out = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return Row("ui_login_and_encoded_links", False, 0, 0, 0, (done.stderr or done.stdout)[-300:])
        ok = set(out["anon"].values()) == {401} and out["index"] == 200 and out["page"] == 200
        return Row("ui_login_and_encoded_links", ok, 0, 0, 0,
                   f"without login {out['anon']}; logged in: index {out['index']}, {out['href']} -> {out['page']}")


SCENARIOS: list[Callable[[], Row]] = [
    db_closed_port, db_unknown_host, db_sqlite_unusable, db_terminated_mid_run, db_gone_mid_benchmark_then_rerun,
    rerun_of_an_accepted_run, slack_5xx_once, slack_down_then_flush, ui_login_and_encoded_links,
]


def _register() -> None:
    """Join the fault matrix of ``benchmarks/faults.py``: each scenario as a registered group member."""
    try:
        from . import Outcome, scenario
    except ImportError:   # run as a script from elsewhere: the matrix is not there, main() still works
        return

    for fn in SCENARIOS:
        def run(work: Path, fn: Callable[[], Row] = fn) -> Outcome:
            row = fn()   # Outcome.lost = expected - stored: the row's own count of lost measurements
            return Outcome(row.survived, row.detail, expected=row.measurements_lost, stored=0,
                           duplicate_rows=row.duplicate_rows, double_booked=row.double_booked)
        run.__module__, run.__name__, run.__qualname__ = __name__, fn.__name__, fn.__name__
        scenario(fn.__name__)(run)


_register()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="scenario names")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    rows = []
    for scenario in SCENARIOS:
        if args.only and scenario.__name__ not in args.only:
            continue
        t0 = time.monotonic()
        row = scenario()
        rows.append(row)
        print(f"{row.name:<34} {'survived' if row.survived else 'FAILED':<9} lost {row.measurements_lost:<3} "
              f"dup {row.duplicate_rows:<3} double-booked {row.double_booked}  {time.monotonic() - t0:5.1f} s  "
              f"{row.detail}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps([r._asdict() for r in rows], indent=1))
    return 0 if all(r.survived for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
