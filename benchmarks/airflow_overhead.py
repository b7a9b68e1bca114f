"""Airflow's per-task overhead: what a task costs beyond calling the zlops function it wraps.

A DAG of N chained tasks, each ONE call of a trivial zlops function (``zlops.run.partition.lower_bound``
on one value: microseconds), so everything measured is overhead:

- **direct, in process**: the call itself, N times in this process.
- **direct, fresh process**: ``python -c "<import zlops.run.partition; call>"``, the floor for any
  process-per-task executor (Python start-up + the zlops import).
- **dag.test()**: Airflow's in-process debug runner (SQLite metadata); wall time over N, and each
  task instance's own start->end.
- **CeleryExecutor**: the real deployment shape on loopback (PostgreSQL, Redis, api-server,
  scheduler, dag-processor, one Celery worker; tests/airflow/celery_stack.py), run triggered
  through the REST API. Per task: the task instance's start->end (the worker's supervisor, the task
  process, the Execution API round trips), the gap from one task's end to the next one's start (the
  scheduler noticing, queueing through Redis, the worker picking it up), and the run's wall time
  over N.

    .venv/bin/python benchmarks/airflow_overhead.py [--tasks 20] [--skip-celery] [--json out.json]

Needs PostgreSQL and Redis on 127.0.0.1 (5432, 6379) for the Celery part, like the e2e test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "airflow"))  # the stack helper the e2e test uses

DAG_FILE = textwrap.dedent('''
    import os

    import pendulum
    from airflow.sdk import DAG, chain, task

    N = int(os.environ.get("ZLOPS_OVERHEAD_TASKS", "20"))


    @task
    def step(i: int) -> int:
        from zlops.run.partition import lower_bound

        return int(lower_bound([float(i)], 1))


    with DAG("zlops_overhead", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):
        chain(*[step.override(task_id=f"step_{i:02d}")(i) for i in range(N)])
''')

DAG_TEST = textwrap.dedent('''
    import json, sys, time
    from airflow.utils import db
    db.resetdb()
    from airflow.dag_processing.dagbag import DagBag
    dag = DagBag(dag_folder=sys.argv[1]).get_dag("zlops_overhead")
    t0 = time.perf_counter()
    run = dag.test()
    wall = time.perf_counter() - t0
    tis = sorted(run.get_task_instances(), key=lambda t: t.start_date)
    print(json.dumps({"state": str(run.state), "wall_s": wall,
                      "ti": [[t.start_date.isoformat(), t.end_date.isoformat()] for t in tis]}))
''')


def _direct(n: int) -> dict[str, float]:
    from zlops.run.partition import lower_bound

    t0 = time.perf_counter()
    for i in range(n):
        lower_bound([float(i)], 1)
    in_process = (time.perf_counter() - t0) / n
    fresh = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "from zlops.run.partition import lower_bound; lower_bound([1.0], 1)"],
                       check=True)
        fresh.append(time.perf_counter() - t0)
    return {"in_process_s": in_process, "fresh_process_s": statistics.median(fresh)}


def _intervals(pairs: list[tuple[datetime, datetime]]) -> dict[str, float]:
    pairs = sorted(pairs)
    durations = [(e - s).total_seconds() for s, e in pairs]
    gaps = [(s2 - e1).total_seconds() for (_, e1), (s2, _) in pairwise(pairs)]
    return {"task_median_s": statistics.median(durations), "task_max_s": max(durations),
            "gap_median_s": statistics.median(gaps) if gaps else 0.0, "gap_max_s": max(gaps) if gaps else 0.0,
            "first_to_last_s": (pairs[-1][1] - pairs[0][0]).total_seconds()}


def _gap_parts(tis: list[dict[str, Any]]) -> dict[str, float]:
    """Where the time between two chained tasks goes: the previous task's end -> this one scheduled
    (the scheduler saw it could run) -> queued (sent to Celery) -> started (a worker's task process)."""
    def ts(t: dict[str, Any], key: str) -> datetime:
        return datetime.fromisoformat(t[key])

    ordered = sorted(tis, key=lambda t: t["start_date"])
    parts: dict[str, list[float]] = {"end_to_scheduled": [], "scheduled_to_queued": [], "queued_to_start": []}
    for prev, t in pairwise(ordered):
        parts["end_to_scheduled"].append((ts(t, "scheduled_when") - ts(prev, "end_date")).total_seconds())
        parts["scheduled_to_queued"].append((ts(t, "queued_when") - ts(t, "scheduled_when")).total_seconds())
        parts["queued_to_start"].append((ts(t, "start_date") - ts(t, "queued_when")).total_seconds())
    return {f"{k}_median_s": statistics.median(v) for k, v in parts.items() if v}


def _dag_test(n: int, dags: Path, root: Path) -> dict[str, Any]:
    from zlops.host.proc import build_env

    env = {**build_env(), "AIRFLOW_HOME": str(root / "dagtest"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(dags), "ZLOPS_OVERHEAD_TASKS": str(n),
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{root}/dagtest.db",
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", DAG_TEST, str(dags)], env=env, capture_output=True, text=True,
                         check=True, timeout=600).stdout.strip().splitlines()[-1]
    data = json.loads(out)
    pairs = [(datetime.fromisoformat(s), datetime.fromisoformat(e)) for s, e in data["ti"]]
    return {"state": data["state"], "wall_s": data["wall_s"], "per_task_wall_s": data["wall_s"] / n,
            **_intervals(pairs)}


def _celery(n: int, dags: Path, root: Path) -> dict[str, Any]:
    from celery_stack import CeleryStack, Worker

    stack = CeleryStack(root / "celery", workers=[Worker("control", ["default"], 1)],
                        env={"ZLOPS_OVERHEAD_TASKS": str(n)}, dags_folder=dags)
    try:
        t0 = time.monotonic()
        stack.start()
        ready_s = time.monotonic() - t0
        stack.wait_for_dag("zlops_overhead")
        run_id = stack.trigger("zlops_overhead")
        states = stack.wait_for_runs([("zlops_overhead", run_id)], timeout=900)
        run = stack.request("GET", f"/dags/zlops_overhead/dagRuns/{run_id}")
        tis = stack.task_instances("zlops_overhead", run_id)
        pairs = [(datetime.fromisoformat(t["start_date"]), datetime.fromisoformat(t["end_date"])) for t in tis]
        wall = (datetime.fromisoformat(run["end_date"]) - datetime.fromisoformat(run["start_date"])).total_seconds()
        return {"state": next(iter(states.values())), "stack_ready_s": ready_s, "run_wall_s": wall,
                "per_task_wall_s": wall / n, **_intervals(pairs), **_gap_parts(tis)}
    finally:
        shutdown = stack.stop()
        stack.drop()
        print("celery stack shutdown:", json.dumps(shutdown), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--skip-celery", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    res: dict[str, Any] = {"tasks": args.tasks}
    with tempfile.TemporaryDirectory(prefix="zlops-overhead-") as tmp:
        root = Path(tmp)
        dags = root / "dags"
        dags.mkdir()
        (dags / "zlops_overhead.py").write_text(DAG_FILE)
        res["direct"] = _direct(args.tasks)
        res["dag_test"] = _dag_test(args.tasks, dags, root)
        if not args.skip_celery:
            res["celery"] = _celery(args.tasks, dags, root)
    d = res["direct"]
    print(f"{args.tasks} chained tasks, each one call of zlops.run.partition.lower_bound")
    print(f"direct: {d['in_process_s'] * 1e6:.1f} us in process; "
          f"{d['fresh_process_s']:.2f} s in a fresh python process")
    for name in ("dag_test", "celery"):
        if name in res:
            r = res[name]
            print(f"{name}: {r['per_task_wall_s']:.2f} s per task of wall time ({r['state']}); "
                  "task instance start->end "
                  f"median {r['task_median_s']:.2f} s (max {r['task_max_s']:.2f}); end->next start median "
                  f"{r['gap_median_s']:.2f} s (max {r['gap_max_s']:.2f})"
                  + (f"; stack ready in {r['stack_ready_s']:.0f} s" if "stack_ready_s" in r else ""))
            if "end_to_scheduled_median_s" in r:
                print(f"  the gap: end -> next scheduled {r['end_to_scheduled_median_s']:.2f} s, scheduled -> queued "
                      f"{r['scheduled_to_queued_median_s']:.2f} s, queued -> started "
                      f"{r['queued_to_start_median_s']:.2f} s "
                      "(medians)")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
