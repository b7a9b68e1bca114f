"""A real Airflow CeleryExecutor deployment on loopback, for the end-to-end test and the overhead benchmark.

PostgreSQL (metadata + Celery results) and Redis (broker) are the machine's own servers on
127.0.0.1; each stack gets fresh databases and an empty Redis db number, removed afterwards. The
components are the real CLIs (``airflow api-server``, ``scheduler``, ``dag-processor``, one
``airflow celery worker -q <queue>`` per stand-in host), each in its own session with its log in the
stack's folder, configured only through the environment of docs/scale-out.md (the same JWT secret
everywhere, the Execution API URL for the workers). :meth:`CeleryStack.stop` sends SIGTERM, waits,
and reports every process of a component's session still alive afterwards.

No triggerer: zlops has no deferrable tasks, and it costs ~250 MB.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
from psycopg import sql

from zlops.host.proc import build_env

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
REDIS = ("127.0.0.1", 6379)
REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def celery_version_ok() -> tuple[bool, str]:
    """celery 5.7 breaks the Celery provider 3.26 (the scheduler cannot import its executor)."""
    import celery

    major, minor = (int(x) for x in celery.__version__.split(".")[:2])
    return (major, minor) < (5, 7), celery.__version__


@dataclass
class Worker:
    name: str               # the stand-in host
    queues: Sequence[str]   # what it consumes
    concurrency: int
    env: Mapping[str, str] = field(default_factory=dict)  # e.g. its own ZLOPS_CONFIG


@dataclass
class Component:
    name: str
    argv: list[str]
    popen: subprocess.Popen[bytes]
    log: Path


class StackError(RuntimeError):
    pass


class CeleryStack:
    """Start with :meth:`start`, always :meth:`stop` then :meth:`drop` (the test's finally)."""

    def __init__(self, root: Path, *, workers: Sequence[Worker], env: Mapping[str, str] | None = None,
                 dags_folder: Path = REPO / "dags") -> None:
        self.root = root
        self.workers = list(workers)
        self.tag = secrets.token_hex(4)
        self.af_db = f"zlops_e2e_af_{self.tag}"
        self.port = free_port()
        self.redis_db: int | None = None
        self.components: list[Component] = []
        self.api = f"http://127.0.0.1:{self.port}"
        db = f"postgresql+psycopg2://{PG['user']}@{PG['host']}:{PG['port']}/{self.af_db}"
        # what a host's own shell would give a daemon (proxies, CA bundles, uv/pip settings: zlops'
        # allowlist), never this test process's AIRFLOW__* (its unit-test settings) or secrets
        self.env = {
            **build_env(),
            "PATH": f"{VENV_BIN}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
            "AIRFLOW_HOME": str(root / "airflow"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db,
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + db.replace("+psycopg2", ""),
            "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.api,
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.api}/execution/",
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(48),
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            **(env or {}),
        }

    # --- services ------------------------------------------------------------------------------
    def _pg(self) -> psycopg.Connection[Any]:
        return psycopg.connect(dbname="postgres", autocommit=True, connect_timeout=5, **PG)  # type: ignore[arg-type]

    def create_database(self, name: str) -> str:
        with self._pg() as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return f"postgresql+psycopg://{PG['user']}@{PG['host']}:{PG['port']}/{name}"

    def drop_database(self, name: str) -> None:
        with self._pg() as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                          "AND pid <> pg_backend_pid()", (name,))
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))

    def _redis(self, db: int) -> Any:
        import redis

        return redis.Redis(host=REDIS[0], port=REDIS[1], db=db, socket_timeout=5)

    def _pick_redis_db(self) -> int:
        """An empty Redis db number (15 downwards; 0 is everyone's default)."""
        for db in range(15, 0, -1):
            client = self._redis(db)
            try:
                if client.dbsize() == 0:
                    client.set(f"zlops-e2e-{self.tag}", "1")  # claim it against a concurrent stack
                    return db
            finally:
                client.close()
        raise StackError("no empty Redis db number on 127.0.0.1:6379")

    # --- components -------------------------------------------------------------------------------
    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 180) -> str:
        """A one-off command in the stack's environment; raises with its output when it fails."""
        done = subprocess.run(list(argv), env={**self.env, **(env or {})}, cwd=self.root, capture_output=True,
                              text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise StackError(f"{' '.join(argv)} exited {done.returncode}:\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done.stdout

    def spawn(self, name: str, argv: list[str], env: Mapping[str, str] | None = None) -> Component:
        log = self.root / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as fh:
            popen = subprocess.Popen(argv, env={**self.env, **(env or {})}, cwd=self.root, stdout=fh,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        comp = Component(name, argv, popen, log)
        self.components.append(comp)
        return comp

    def start(self, *, ready_timeout: float = 180, before_components: Sequence[Sequence[str]] = ()) -> None:
        """Databases, ``airflow db migrate``, ``before_components`` (e.g. sync-pools), then every component."""
        (self.root / "airflow").mkdir(parents=True, exist_ok=True)
        self.create_database(self.af_db)
        self.redis_db = self._pick_redis_db()
        self.env["AIRFLOW__CELERY__BROKER_URL"] = f"redis://{REDIS[0]}:{REDIS[1]}/{self.redis_db}"
        self.run(["airflow", "db", "migrate"])
        for argv in before_components:
            self.run(argv)
        self.spawn("api-server", ["airflow", "api-server"])
        self.spawn("scheduler", ["airflow", "scheduler"])
        self.spawn("dag-processor", ["airflow", "dag-processor"])
        for w in self.workers:
            self.spawn(f"worker-{w.name}", [
                "airflow", "celery", "worker", "--queues", ",".join(w.queues), "--concurrency", str(w.concurrency),
                "--celery-hostname", f"{w.name}@%h", "--skip-serve-logs",
                "--pid", str(self.root / f"worker-{w.name}.pid")], env=w.env)
        deadline = time.monotonic() + ready_timeout
        self._wait(lambda: self._healthy(), deadline, "scheduler and dag-processor healthy in /api/v2/monitor/health")
        for w in self.workers:
            comp = self.component(f"worker-{w.name}")
            self._wait(lambda c=comp: " ready." in c.log.read_text(errors="replace"), deadline,
                       f"celery worker {w.name} ready")

    def component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)

    def _healthy(self) -> bool:
        try:
            health = httpx.get(f"{self.api}/api/v2/monitor/health", timeout=5).json()
        except (httpx.HTTPError, ValueError):
            return False
        return all((health.get(k) or {}).get("status") == "healthy"
                   for k in ("metadatabase", "scheduler", "dag_processor"))

    def _wait(self, ready: Any, deadline: float, what: str) -> None:
        while time.monotonic() < deadline:
            dead = [c for c in self.components if c.popen.poll() is not None]
            if dead:
                raise StackError(f"{dead[0].name} exited {dead[0].popen.returncode} while waiting for {what}\n"
                                 + self.tails())
            if ready():
                return
            time.sleep(1)
        raise StackError(f"timed out waiting for {what}\n" + self.tails())

    # --- REST API ---------------------------------------------------------------------------------
    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        resp = httpx.request(method, f"{self.api}/api/v2{path}", timeout=30, **kwargs)
        if resp.status_code >= 400:
            raise StackError(f"{method} {path}: HTTP {resp.status_code} {resp.text[:2000]}")
        return resp.json() if resp.content else None

    def wait_for_dag(self, dag_id: str, timeout: float = 120) -> None:
        def parsed() -> bool:
            return httpx.get(f"{self.api}/api/v2/dags/{dag_id}", timeout=10).status_code == 200

        self._wait(parsed, time.monotonic() + timeout, f"DAG {dag_id} parsed")
        errors = self.request("GET", "/importErrors")
        self.request("PATCH", f"/dags/{dag_id}", json={"is_paused": False})
        if errors.get("total_entries"):
            print("import errors (other DAGs):", json.dumps(errors)[:2000])

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None) -> str:
        run = self.request("POST", f"/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": dict(conf or {})})
        return str(run["dag_run_id"])

    def wait_for_runs(self, runs: Sequence[tuple[str, str]], timeout: float = 600) -> dict[tuple[str, str], str]:
        states: dict[tuple[str, str], str] = {}

        def done() -> bool:
            for dag_id, run_id in runs:
                states[(dag_id, run_id)] = self.request("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"]
            return all(s in ("success", "failed") for s in states.values())

        self._wait(done, time.monotonic() + timeout, f"DAG runs {list(runs)} finished")
        return states

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return list(self.request("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances",
                                 params={"limit": 1000})["task_instances"])

    def memory_mb(self) -> dict[str, float]:
        """PSS of each component's whole session (its children included), in MB."""
        out = {}
        for comp in self.components:
            total = 0
            for p in _session_members(comp.popen.pid):
                try:
                    total += p.memory_full_info().pss
                except psutil.Error:
                    continue
            out[comp.name] = round(total / 1e6)
        return out

    # --- shutdown -------------------------------------------------------------------------------
    def stop(self, timeout: float = 60) -> dict[str, Any]:
        """SIGTERM every component (workers first, they finish their tasks), wait, then report
        each one's exit status, how long it took, and the processes of its session still alive
        (SIGKILLed, so nothing outlives the test)."""
        order = sorted(self.components, key=lambda c: (not c.name.startswith("worker-"), c.name))
        report: dict[str, Any] = {}
        start = time.monotonic()
        for comp in order:
            if comp.popen.poll() is None:
                comp.popen.send_signal(signal.SIGTERM)
        pending = list(order)
        while pending and time.monotonic() - start < timeout:
            for comp in list(pending):
                if comp.popen.poll() is not None:
                    report[comp.name] = {"rc": comp.popen.returncode, "seconds": round(time.monotonic() - start, 1)}
                    pending.remove(comp)
            time.sleep(0.2)
        for comp in pending:
            report[comp.name] = {"rc": None, "seconds": None}
        time.sleep(1)  # children that got the same signal
        for comp in order:
            left = _session_members(comp.popen.pid)
            report[comp.name]["leftovers"] = [f"{p.pid} {' '.join(p.cmdline()[:4])}" for p in left if _alive(p)]
            for p in left:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            if comp.popen.poll() is None:
                comp.popen.kill()
                comp.popen.wait()
        return report

    def drop(self) -> None:
        """Drop the stack's databases and flush its Redis db (after :meth:`stop`)."""
        self.drop_database(self.af_db)
        if self.redis_db is not None:
            client = self._redis(self.redis_db)
            try:
                client.flushdb()
            finally:
                client.close()

    def task_log(self, dag_id: str, run_id: str, task_id: str, chars: int = 3000) -> str:
        """The tail of a task's newest attempt log (the workers write them under AIRFLOW_HOME/logs)."""
        folder = self.root / "airflow" / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
        attempts = sorted(folder.glob("attempt=*.log"))
        if not attempts:
            return f"(no log in {folder})"
        lines = []
        for line in attempts[-1].read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                lines.append(line)
                continue
            lines.append(f"{rec.get('level', '')} {rec.get('event', '')}")
            for exc in rec.get("error_detail") or []:
                lines.append(f"  {exc.get('exc_type')}: {exc.get('exc_value')}")
        return f"----- {dag_id}.{task_id} ({attempts[-1].name})\n" + "\n".join(lines)[-chars:]

    def tails(self, lines: int = 40) -> str:
        out = []
        for comp in self.components:
            text = comp.log.read_text(errors="replace").splitlines() if comp.log.exists() else []
            out.append(f"----- {comp.name} (pid {comp.popen.pid}, rc {comp.popen.poll()}): last {lines} lines of "
                       f"{comp.log}\n" + "\n".join(text[-lines:]))
        return "\n".join(out)


def _session_members(sid: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid:
                out.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
