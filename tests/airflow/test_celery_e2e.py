"""End to end on a real CeleryExecutor: two Celery workers on two queues stand in for two device hosts.

PostgreSQL and Redis on loopback, ``airflow api-server``, ``scheduler``, ``dag-processor`` and two
``airflow celery worker`` processes: ``hostA`` (queues hostA + default, the control tasks) and
``hostB`` (queue hostB). Each "host" has its own zlops home (its own worktrees, venvs, artifacts and
device locks, as on separate machines) and both share the zlops store in PostgreSQL. Two nightlies
are triggered through the REST API at once: ``ops`` (partitioned: each case on one device of each
pool) and ``whole`` (every device runs every case); both use the same four devices, so their device
tasks compete for the same one-slot Airflow pools.

Asserted: every device task ran on its host's queue (the REST API's ``queue``, and its artifacts in
that host's home); no device ran two benchmark processes at once (task-instance intervals per Airflow
pool, and the benchmark processes' own intervals); the results, plans and verdicts are in PostgreSQL;
every component shuts down on SIGTERM with nothing left behind. About two minutes on 2 cores.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("airflow.providers.celery")

from celery_stack import VENV_BIN, CeleryStack, StackError, Worker, celery_version_ok
from sharded_upstream import ShardedUpstream, sharded_suite

from zlops.config.settings import load_config
from zlops.model import RunStatus, ShardStatus

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(900)]

CASES = {"heavy": 3.0, "mid": 2.0, "l1": 1.0, "l2": 1.0}          # ms "timings" the bench reports
DURATIONS = {"heavy": 1.2, "mid": 0.6, "l1": 0.2, "l2": 0.2}       # seconds a round each case sleeps
POOLS = {"ga": ("hostA", [0, 1]), "gb": ("hostB", [0, 1])}


def _config(root: Path, host: str, upstream: Path, store_url: str) -> Path:
    suites = {}
    for name, partitioned in (("ops", True), ("whole", False)):
        suite = sharded_suite(upstream, list(POOLS), rounds=1, timeout_s=120)
        suite["command"] = [*suite["command"], "--tag", "{artifacts}"]
        suite["env"] = {"SHARD_LOG": str(root / f"shards-{name}.jsonl")}
        if not partitioned:
            suite.pop("partition")
            suite["command"] = [a for a in suite["command"] if a not in ("--cases", "{cases}")]
        suites[name] = suite
    data = {
        "home": str(root / host), "database": store_url, "judge": "simple", "device_wait_s": 60,
        "locks_dir": str(root / host / "device-locks"),  # leases are host-wide: one folder per stand-in host
        # two stand-in hosts share this machine's CPUs: each would see the other's benchmarks as foreign load
        "contention": {"gate": False},
        "hosts": {"hostA": {"labels": ["stand-in for an 8-GPU host"]}, "hostB": {}},
        "pools": {p: {"backend": "cpu", "devices": devs, "host": h} for p, (h, devs) in POOLS.items()},
        "suites": suites,
    }
    path = root / f"zlops-{host}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _ts(value: str | None) -> datetime:
    assert value, "a finished task instance without start/end date"
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _overlaps(intervals: list[tuple[Any, Any, str]]) -> list[str]:
    out = []
    ordered = sorted(intervals)
    for (s1, e1, who1), (s2, e2, who2) in pairwise(ordered):
        if s2 < e1:
            out.append(f"{who1} [{s1}..{e1}] overlaps {who2} [{s2}..{e2}]")
    return out


def test_nightlies_on_two_celery_hosts(tmp_path: Path) -> None:
    ok, version = celery_version_ok()
    assert ok, f"celery {version} installed: 5.7 breaks apache-airflow-providers-celery 3.26; pin celery<5.7"
    root = tmp_path
    up = ShardedUpstream(root / "upstream")
    sha = up.commit_cases(CASES, DURATIONS)
    stack = CeleryStack(root, workers=[])
    store_db = f"zlops_e2e_store_{stack.tag}"
    store_url = stack.create_database(store_db)
    configs = {h: _config(root, h, up.path, store_url) for h in ("hostA", "hostB")}
    stack.env["ZLOPS_CONFIG"] = str(configs["hostA"])  # scheduler, dag-processor, api-server
    stack.workers = [Worker("hostA", ["hostA", "default"], 2),
                     Worker("hostB", ["hostB"], 2, env={"ZLOPS_CONFIG": str(configs["hostB"])})]
    shutdown: dict[str, Any] = {}
    try:
        stack.start(before_components=[[str(VENV_BIN / "zlops"), "airflow", "sync-pools"]])
        dag_ids = ["zlops_nightly_ops", "zlops_nightly_whole"]
        for dag_id in dag_ids:
            stack.wait_for_dag(dag_id)
        runs = [(dag_id, stack.trigger(dag_id)) for dag_id in dag_ids]
        states = stack.wait_for_runs(runs, timeout=600)
        memory = stack.memory_mb()
        print(f"memory (PSS, MB) after the runs: {memory}, total {sum(memory.values())} MB")
        tis = {run: stack.task_instances(*run) for run in runs}
        failed = {run: [t["task_id"] for t in items if t["state"] != "success"] for run, items in tis.items()}
        logs = "\n".join(stack.task_log(*run, task) for run, tasks in failed.items() for task in tasks
                         if task != "watcher")
        assert set(states.values()) == {"success"}, f"runs {states}, failed tasks {failed}\n{logs}\n{stack.tails(15)}"
        _check_routing_and_pools(tis)
        _check_store(root, configs, runs, sha)
        _print_overhead(configs, tis)
    except StackError as exc:
        pytest.fail(str(exc), pytrace=False)
    finally:
        shutdown = stack.stop(timeout=90)
        stack.drop()
        stack.drop_database(store_db)
    print("shutdown:", json.dumps(shutdown))
    slow = {k: v for k, v in shutdown.items() if v["rc"] != 0 or v["leftovers"]}
    assert not slow, f"components that did not shut down cleanly on SIGTERM: {slow}\n{stack.tails()}"


def _check_routing_and_pools(tis: dict[tuple[str, str], list[dict[str, Any]]]) -> None:
    by_pool: dict[str, list[tuple[Any, Any, str]]] = defaultdict(list)
    ready: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
    for (dag_id, _), items in tis.items():
        for t in items:
            task_id = t["task_id"]
            if task_id.startswith(("run_", "confirm_")):
                pool = task_id.split("_")[1]
                host = POOLS[pool][0]
                assert t["queue"] == host, f"{dag_id}.{task_id} ran on queue {t['queue']}, not {host}"
                device = int(task_id.rsplit("_", 1)[1]) if task_id.startswith("run_") else POOLS[pool][1][0]
                assert t["pool"] == f"zlops-{pool}-{device}"
                by_pool[t["pool"]].append((_ts(t["start_date"]), _ts(t["end_date"]), f"{dag_id}.{task_id}"))
                if task_id.startswith("run_"):
                    ready[t["pool"]].append((_ts(t["scheduled_when"]), _ts(t["end_date"])))
            elif task_id.startswith("cleanup_"):
                assert t["queue"] == task_id.removeprefix("cleanup_")
            else:
                assert t["queue"] == "default", f"{dag_id}.{task_id} on {t['queue']}"
    assert sorted(by_pool) == ["zlops-ga-0", "zlops-ga-1", "zlops-gb-0", "zlops-gb-1"]
    clashes = [c for intervals in by_pool.values() for c in _overlaps(intervals)]
    assert not clashes, "an Airflow pool of one slot ran two tasks at once: " + "; ".join(clashes)
    # contention: the two nights' device tasks were both runnable while the first still held the slot
    contended = sorted(pool for pool, items in ready.items() if len(items) == 2 and max(items)[0] < min(items)[1])
    print(f"device pools the two nightlies contended for (the pool made one wait): {contended}")


def _print_overhead(configs: dict[str, Path], tis: dict[tuple[str, str], list[dict[str, Any]]]) -> None:
    """What a device task cost beyond its benchmark process (docs/scale-out.md quotes these lines)."""
    from zlops.steps.context import make_run_key, open_store

    store = open_store(load_config(configs["hostA"]))
    try:
        extra, waits = [], []
        for (dag_id, run_id), items in tis.items():
            shards = {(s.pool, s.device): s for s in store.shards(
                make_run_key("nightly", dag_id.removeprefix("zlops_nightly_"), run_id))}
            for t in items:
                if t["task_id"].startswith("run_"):
                    _, pool, device = t["task_id"].split("_")
                    busy = shards[(pool, int(device))].duration_s or 0.0
                    extra.append((_ts(t["end_date"]) - _ts(t["start_date"])).total_seconds() - busy)
                    waits.append((_ts(t["start_date"]) - _ts(t["scheduled_when"])).total_seconds())
        wall = {dag_id: (max(_ts(t["end_date"]) for t in items) - min(_ts(t["start_date"]) for t in items))
                .total_seconds() for (dag_id, _), items in tis.items()}
        print("device tasks: task instance time beyond the benchmark process: "
              f"median {sorted(extra)[len(extra) // 2]:.2f} s "
              f"(max {max(extra):.2f} s, includes prepare: hostB builds its own worktree and venv); scheduled -> "
              f"started median {sorted(waits)[len(waits) // 2]:.2f} s "
              f"(max {max(waits):.2f} s: waiting for the device's "
              f"pool slot); run walls {wall}")
    finally:
        store.dispose()


def _check_store(root: Path, configs: dict[str, Path], runs: list[tuple[str, str]], sha: str) -> None:
    from zlops.run.partition import Plan
    from zlops.steps.context import make_run_key, open_store

    cfg = {h: load_config(p) for h, p in configs.items()}
    store = open_store(cfg["hostA"])
    assert store.url.startswith("postgresql")
    try:
        processes: dict[tuple[str, str, int], list[tuple[float, float, str]]] = defaultdict(list)
        for dag_id, run_id in runs:
            suite = dag_id.removeprefix("zlops_nightly_")
            run = store.get_run(make_run_key("nightly", suite, run_id))
            assert run is not None and run.sha == sha and run.accepted and run.status is RunStatus.DONE
            shards = store.shards(run.run_key)
            assert {(s.pool, s.device) for s in shards} == {(p, d) for p, (_, ds) in POOLS.items() for d in ds}
            assert all(s.status is ShardStatus.OK for s in shards), [(s.pool, s.device, s.error) for s in shards]
            for s in shards:  # each shard ran on its host: its artifacts are in that host's home
                assert Path(s.artifact_dir).is_relative_to(cfg[POOLS[s.pool][0]].home), (s.pool, s.artifact_dir)
            ran: dict[str, list[str]] = defaultdict(list)
            for pool, _, res in store.results(run.run_key):
                ran[pool].append(res.case)
            if suite == "ops":  # partitioned: each case once per pool, on the device the stored plan named
                for pool in POOLS:
                    assert sorted(ran[pool]) == sorted(CASES), (pool, ran[pool])
                    plan = Plan.from_dict(run.meta["partition"][pool])
                    assert sorted(c for cs in plan.assignments.values() for c in cs) == sorted(CASES)
            else:  # every device ran every case
                assert all(sorted(ran[pool]) == sorted(list(CASES) * 2) for pool in POOLS), ran
            assert len(store.comparisons(run.run_key)) == 2 * len(CASES)
            for line in (root / f"shards-{suite}.jsonl").read_text().splitlines():
                rec = json.loads(line)
                host = next(h for h in cfg if Path(rec["tag"]).is_relative_to(cfg[h].home))
                pool = Path(rec["tag"]).parent.name
                processes[(host, pool, int(rec["device"]))].append(
                    (rec["start"], rec["end"], f"{suite}:{rec['cases']}"))
        clashes = [c for intervals in processes.values() for c in _overlaps(intervals)]
        assert not clashes, "two benchmark processes on one device at once: " + "; ".join(clashes)
        assert len(processes) == 4 and all(len(v) == 2 for v in processes.values())  # one per suite each
        for host in cfg:  # each host's cleanup_<queue> removed the worktrees it built
            for suite in ("ops", "whole"):
                wt = cfg[host].worktrees_dir / suite
                assert not wt.exists() or not any(wt.iterdir()), f"{host} left worktrees in {wt}"
    finally:
        store.dispose()
        shutil.rmtree(root / "upstream", ignore_errors=True)
