"""Store scale: S series x H nights on SQLite and PostgreSQL; ingest, history reads (old vs new), RSS, bytes.

    python benchmarks/scale.py --db sqlite,postgres --series 1000,20000 --nights 30,365
    python benchmarks/scale.py --series 1000 --nights 30 --compare 1000   # + the compare and report steps

For each database and S a fresh store is filled with synthetic accepted nightly runs (two pools, one
device each, S/2 cases per pool, ``--samples`` raw samples per result, a compare table per night with a
few regressions) by bulk inserts (sqlite3 executemany / PostgreSQL COPY), not the per-run pipeline. At
each H of ``--nights`` (the store grows from one checkpoint to the next) every measurement runs in a
fresh subprocess, so its peak RSS (getrusage ru_maxrss) is its own:

- ingest: one night through the real API, ``record_shard`` per shard + ``save_series_points`` of
  ``compare.pool_results`` (the CaseResult values are built before the clock starts: that is parsing);
- new: ``compare_window`` (the history frame of window + 1 nights and every series' baseline, median and
  count, from the same series points) + ``verdict_evidence`` (level changes and A/B rows of those
  runs): everything the judge reads of the past;
- old: the per-series path the nightly used before (``series_history`` + ``series_verdicts`` per series,
  the pre-0004 ``baseline_candidates`` that loads every accepted run's raw samples). The per-series part
  is timed on ``--old-subset`` series and scaled by S/subset; the old baseline_candidates on the newest
  ``--old-runs`` runs and scaled by H/old-runs (both linear in what they scale); both are marked
  "extrapolated" in the table.
- ``--compare``: ``zlops.compare_step`` then ``zlops.report_step`` on tonight's run (every
  1000th series 10% slower, so the report draws trends); git is replaced by the synthetic ancestry
  (``gitops`` patched in-process). Wall and CPU seconds of this process (PostgreSQL's own CPU is
  not in the latter), peak RSS of both steps; the 1-minute load average is printed beside each row
  (the machine is shared).

Bytes per sample: the database's size (SQLite file + WAL; ``pg_database_size``) over the raw samples stored.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SUITE = "bench"
POOLS = ("npu", "cpu")
T0 = datetime(2025, 1, 1, 2, 0, tzinfo=timezone.utc)
LEVEL_CHANGES = ("regression", "severe", "improved")
PG = dict(host="127.0.0.1", port=5432, user="postgres")


def identity() -> dict[str, Any]:
    """The caliber every synthetic shard was measured on (one machine, one driver, one timer)."""
    from zlops.identity import build_identity

    return build_identity(backend_identity={"backend": "cpu", "device_model": "bench-cpu", "driver": "1",
                                            "timer": "perf_counter"}, rounds=10, pins={})


def sha(night: int) -> str:
    return f"{night:040x}"


def run_key(night: int) -> str:
    return f"nightly:{SUITE}:n{night:05d}"


def case(i: int) -> str:
    return f"op_{i % 97}[float32,{1024 * (1 + i // 97)}x{64 + i % 13}]"


# --- bulk fill ---------------------------------------------------------------------------------------

def night_values(rng: np.random.Generator, series: int, samples: int, base: np.ndarray) -> np.ndarray:
    """(series, samples) positive values: a per-series level with 1% noise."""
    return base[:, None] * rng.lognormal(0.0, 0.01, (series, samples))


class Filler:
    """Writes whole nights straight into the tables (ids chosen here, sequences fixed at the end)."""

    def __init__(self, url: str, series: int, samples: int) -> None:
        from zlops.store import Store
        from zlops.store.points import spreads

        self.store = Store.open(url)
        self.url = url
        self.series = series
        self.samples = samples
        self.spreads = spreads
        self.rng = np.random.default_rng(13)
        self.base = self.rng.lognormal(0.0, 1.0, series) * 10.0
        self.per_pool = series // len(POOLS)
        self.nights = 0
        self.pg = url.startswith("postgresql")
        self.identity = json.dumps(identity())

    def fill(self, upto: int) -> None:
        raw = self.store.engine.raw_connection()
        try:
            cur = raw.cursor()
            if not self.pg:  # the store's engine hands transaction control to SQLAlchemy: begin here
                cur.execute("BEGIN")
            if self.nights == 0:  # the series dimension, once (ids 1..S in case order)
                t = (lambda b: b) if self.pg else int
                self._write(cur, "series", 'id, suite, pool, "case", metric, unit, lower_is_better',
                            [(i + 1, SUITE, POOLS[i // self.per_pool], case(i), "latency", "us", t(True))
                             for i in range(self.series)])
            for night in range(self.nights + 1, upto + 1):
                self._night(cur, night)
            raw.commit()
        finally:
            raw.close()
        self.nights = max(self.nights, upto)
        if self.pg:
            with self.store.engine.begin() as conn:
                for table in ("runs", "shards", "results", "series", "comparisons"):
                    conn.exec_driver_sql(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                         f"(SELECT coalesce(max(id), 1) FROM {table}))")
            # a store that grew night by night has planner statistics (autovacuum); a bulk load has none yet
            with self.store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("ANALYZE")

    def _night(self, cur: Any, night: int) -> None:
        when = T0 + timedelta(days=night)
        values = night_values(self.rng, self.series, self.samples, self.base)
        medians = np.median(values, axis=1)
        spread = self.spreads([tuple(v) for v in values[:, : self.samples].tolist()])
        texts = [json.dumps([round(x, 6) for x in row]) for row in values.tolist()]
        ts = when if self.pg else when.strftime("%Y-%m-%d %H:%M:%S.%f")
        t = (lambda b: b) if self.pg else (lambda b: int(b))
        runs = [(night, run_key(night), "nightly", SUITE, sha(night), "main", "done", t(True), ts, ts, "{}")]
        shards, results, points, comps = [], [], [], []
        for p, pool in enumerate(POOLS):
            shard_id = night * len(POOLS) + p
            shards.append((shard_id, night, pool, 0, "cpu", "ok", 0, ts, ts, "/tmp/art", None, None, None,
                           self.identity))
            for i in range(p * self.per_pool, (p + 1) * self.per_pool):
                rid = night * self.series + i
                c = case(i)
                results.append((rid, shard_id, c, "latency", "us", t(True), float(medians[i]), self.samples,
                                spread[i], texts[i], "{}"))
                points.append((night, i + 1, float(medians[i]), self.samples, spread[i]))
                verdict = "regression" if (i + night) % 997 == 0 else "unchanged"
                comps.append((rid, night, pool, c, "latency", "us", t(True), None, None, None, None, None, None,
                              None, None, None, verdict, ""))
        self._write(cur, "runs", "id, run_key, kind, suite, sha, branch, status, accepted, started_at, "
                    "finished_at, meta", runs)
        self._write(cur, "shards", "id, run_id, pool, device, backend, status, exit_code, started_at, ended_at, "
                    "artifact_dir, error, results_file, telemetry, identity", shards)
        self._write(cur, "results", 'id, shard_id, "case", metric, unit, lower_is_better, median, n, spread_pct, '
                    "samples, params", results)
        self._write(cur, "series_points", "run_id, series_id, median, n, spread_pct", points)
        self._write(cur, "comparisons", 'id, run_id, pool, "case", metric, unit, lower_is_better, base_run_key, '
                    "base_sha, base_median, base_n, head_median, head_n, change_pct, worse_pct, threshold_pct, verdict, note",
                    comps)

    def _write(self, cur: Any, table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
        if self.pg:
            with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join("?" * (columns.count(",") + 1))
            cur.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)

    def size_bytes(self) -> int:
        if self.pg:
            with self.store.engine.connect() as conn:
                return int(conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar())
        path = Path(self.store.engine.url.database or "")
        with self.store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


# --- measurements (each in its own process) -------------------------------------------------------------

def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure_ingest(url: str, series: int, samples: int, nights: int) -> dict[str, Any]:
    from zlops.judge.compare import pool_results
    from zlops.model import CaseResult, RunRecord, RunStatus, ShardOutcome, ShardStatus
    from zlops.store import Store

    store = Store.open(url)
    key = f"nightly:{SUITE}:tonight"
    rng = np.random.default_rng(7)
    base = np.random.default_rng(13).lognormal(0.0, 1.0, series) * 10.0
    values = night_values(rng, series, samples, base).tolist()
    per_pool = series // len(POOLS)
    shards = []
    for p, pool in enumerate(POOLS):
        results = [CaseResult(case(i), "latency", "us", True, tuple(values[i]))
                   for i in range(p * per_pool, (p + 1) * per_pool)]
        shards.append((ShardOutcome(pool=pool, device=0, backend="cpu", status=ShardStatus.OK,
                                    artifact_dir=Path("/tmp/art"), exit_code=0, started_at=None, ended_at=None),
                       results))
    rss0 = _rss_mib()
    store.upsert_run(RunRecord(key, "nightly", SUITE, sha(nights + 1), "main", RunStatus.RUNNING,
                               started_at=T0 + timedelta(days=nights + 1)))
    t0 = time.perf_counter()
    for outcome, results in shards:
        store.record_shard(key, outcome, results)
    t1 = time.perf_counter()
    head = pool_results(store.results(key))
    t2 = time.perf_counter()
    stored = store.save_series_points(key, head)
    t3 = time.perf_counter()
    assert stored == series, stored
    with store.session() as session:  # leave the store as it was
        session.execute(__import__("sqlalchemy").text("DELETE FROM runs WHERE run_key = :k"), {"k": key})
    return {"record_shard_s": t1 - t0, "read_tonight_s": t2 - t1, "save_points_s": t3 - t2,
            "ingest_s": (t1 - t0) + (t3 - t2), "rss_before_mib": rss0, "peak_rss_mib": _rss_mib()}


def measure_new(url: str, nights: int, window: int) -> dict[str, Any]:
    import zlops.store.frames  # noqa: F401 - pandas is imported once per process, not per read
    from zlops.store import Store

    store = Store.open(url)
    ancestors = [sha(n) for n in range(nights + 2)]
    rss0 = _rss_mib()
    t0 = time.perf_counter()
    # what the compare step reads of the past: the judge's window + 1 nights and every series' baseline
    cw = store.compare_window(SUITE, ancestors=ancestors, history_window=window + 1, exclude_run_key="tonight")
    t1 = time.perf_counter()
    evidence = store.verdict_evidence(sorted(set(cw.history["run_key"])), only_evidence=True)
    t2 = time.perf_counter()
    return {"history_s": t1 - t0, "verdicts_s": t2 - t1, "baseline_s": 0.0, "read_s": t2 - t0,
            "rows": len(cw.history), "level_changes": len(evidence), "baseline_series": len(cw.baselines),
            "rss_before_mib": rss0, "peak_rss_mib": _rss_mib()}


def legacy_baseline_candidates(session: Any, suite: str, *, shas: set[str], exclude_run_key: str | None) -> list[Any]:
    """baseline_candidates as it was before 0004 (git show db3d7da:zlops/store/series.py): every
    accepted ancestor run's raw samples, pooled per series, newest first."""
    from sqlalchemy import select

    from zlops.model import BaselinePoint
    from zlops.store.models import Result, Run, Shard

    runs = session.execute(select(Run.id, Run.run_key, Run.sha, Run.finished_at, Run.started_at)
                           .where(Run.suite == suite, Run.kind == "nightly", Run.accepted.is_(True)))
    chosen = {rid: (rk, s, f or st) for rid, rk, s, f, st in runs if s in shas and rk != exclude_run_key}
    pooled: dict[tuple[int, str, str, str], tuple[str, list[float]]] = {}
    ids = sorted(chosen)
    for start in range(0, len(ids), 500):
        rows = session.execute(
            select(Shard.run_id, Shard.pool, Result.case, Result.metric, Result.unit, Result.samples)
            .join(Result, Result.shard_id == Shard.id)
            .where(Shard.run_id.in_(ids[start:start + 500]), Shard.status == "ok")
            .order_by(Shard.run_id, Shard.pool, Result.case, Result.metric, Shard.device))
        for rid, pool, c, metric, unit, samples in rows:
            pooled.setdefault((rid, pool, c, metric), (unit, []))[1].extend(float(v) for v in samples)
    out = []
    for (rid, pool, c, metric), (unit, samples) in pooled.items():
        rk, s, when = chosen[rid]
        out.append((when, rid, (pool, c, metric, BaselinePoint.of_samples(rk, s, unit, samples), when)))
    out.sort(key=lambda item: (-item[0].timestamp(), -item[1], item[2][:3]))
    return [cand for _, _, cand in out]


def measure_old(url: str, series: int, nights: int, window: int, subset: int, old_runs: int) -> dict[str, Any]:
    from zlops.store import Store

    store = Store.open(url)
    rss0 = _rss_mib()
    newest = [sha(n) for n in range(max(1, nights - old_runs + 1), nights + 1)]
    t0 = time.perf_counter()
    with store._read() as session:
        candidates = legacy_baseline_candidates(session, SUITE, shas=set(newest), exclude_run_key="tonight")
    t1 = time.perf_counter()
    per_pool = series // len(POOLS)
    keys = [(POOLS[k % 2], case((k % 2) * per_pool + k // 2), "latency") for k in range(subset)]
    ancestors = {sha(n) for n in range(nights + 2)}
    for key in keys:
        points = [p for p in store.series_history(SUITE, *key, limit=window) if p.sha in ancestors]
        store.series_verdicts([p.run_key for p in points], *key)
    t2 = time.perf_counter()
    baseline_s = (t1 - t0) * nights / len(newest)
    per_series_s = (t2 - t1) * series / subset
    return {"old_baseline_s": baseline_s, "old_per_series_s": per_series_s, "read_s": baseline_s + per_series_s,
            "candidates": len(candidates), "measured_s": t2 - t0,
            "extrapolated": len(newest) < nights or subset < series,
            "rss_before_mib": rss0, "peak_rss_mib": _rss_mib()}


def measure_compare(url: str, series: int, nights: int, window: int) -> dict[str, Any]:
    """``zlops.compare_step`` then the report step (``zlops.report_step``: figures, markdown, HTML,
    alerts, the Slack payload written to the artifacts) of a fresh night stored through ingest, where
    every 1000th series is 10% slower (git replaced by the ancestry)."""
    import zlops.host.gitops as gitops
    from zlops.config.settings import parse_config
    from zlops.model import RunRecord, RunStatus, ShardOutcome, ShardStatus
    from zlops.steps.compare import compare as compare_step
    from zlops.steps.context import RunContext
    from zlops.steps.report import report as report_step
    from zlops.store import Store

    home = Path(os.environ.get("TMPDIR", "/tmp")) / "zlops-scale-home"
    config = parse_config({
        "home": str(home), "database": url, "judge": "noise", "noise": {"window": window},
        "pools": {"npu": {"backend": "cpu", "devices": [0]}, "cpu": {"backend": "cpu", "devices": [1]}},
        "suites": {SUITE: {"repo": str(home / "none.git"), "branch": "main", "install": [], "command": ["true"],
                           "format": "zlops-json", "pools": list(POOLS)}}}, source="benchmarks/scale.py")
    store = Store.open(url)
    key = f"nightly:{SUITE}:compare"
    rng = np.random.default_rng(9)
    base = np.random.default_rng(13).lognormal(0.0, 1.0, series) * 10.0
    values = night_values(rng, series, 10, base)
    values[::1000] *= 1.10
    values = values.tolist()
    from zlops.model import CaseResult

    per_pool = series // len(POOLS)
    store.upsert_run(RunRecord(key, "nightly", SUITE, sha(nights + 1), "main", RunStatus.RUNNING,
                               started_at=T0 + timedelta(days=nights + 1)))
    for p, pool in enumerate(POOLS):
        store.record_shard(key, ShardOutcome(pool=pool, device=p, backend="cpu", status=ShardStatus.OK,
                                             artifact_dir=Path("/tmp/art"), exit_code=0, started_at=None,
                                             ended_at=None),
                           [CaseResult(case(i), "latency", "us", True, tuple(values[i]))
                            for i in range(p * per_pool, (p + 1) * per_pool)], identity=identity())
    gitops.ensure_mirror = lambda repo, path: gitops.Mirror(path, repo)  # type: ignore[assignment]
    gitops.ancestors = lambda mirror, commit, max_count=None: [sha(n) for n in range(nights + 1, 0, -1)]  # type: ignore[assignment]
    gitops.first_parent_line = lambda mirror, branch, max_count=None: [sha(n) for n in range(nights + 1, 0, -1)]  # type: ignore[assignment]
    ctx = RunContext(config, SUITE, key, sha(nights + 1))
    rss0 = _rss_mib()
    t0, c0 = time.perf_counter(), time.process_time()
    summary = compare_step(ctx)
    t1, c1 = time.perf_counter(), time.process_time()
    out = report_step(ctx)
    t2, c2 = time.perf_counter(), time.process_time()
    from sqlalchemy import text

    with store.session() as session:  # leave the store as it was (alerts and messages do not cascade)
        rid = session.execute(text("SELECT id FROM runs WHERE run_key = :k"), {"k": key}).scalar()
        session.execute(text("DELETE FROM alert_events WHERE alert_id IN "
                             "(SELECT id FROM alerts WHERE opened_run_id = :r OR last_run_id = :r)"), {"r": rid})
        session.execute(text("DELETE FROM alerts WHERE opened_run_id = :r OR last_run_id = :r"), {"r": rid})
        session.execute(text("UPDATE notifications SET parent_id = NULL WHERE run_id = :r"), {"r": rid})
        session.execute(text("DELETE FROM notifications WHERE run_id = :r"), {"r": rid})
        session.execute(text("DELETE FROM runs WHERE id = :r"), {"r": rid})
    return {"compare_s": t1 - t0, "report_s": t2 - t1, "compare_cpu_s": c1 - c0, "report_cpu_s": c2 - c1,
            "judged": summary.judged,
            "flagged": sum(1 for c in summary.comparisons if c.verdict.flagged or c.verdict.awaiting_confirmation),
            "trends": len(out.plots), "rss_before_mib": rss0, "peak_rss_mib": _rss_mib(),
            "load": os.getloadavg()[0]}


def _child(args: list[str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "_measure", *args], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"measurement {args} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- driver -------------------------------------------------------------------------------------------

def _database(kind: str, tag: str) -> tuple[str, Any]:
    if kind == "sqlite":
        folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"zlops-scale-{os.getpid()}"
        path = folder / f"{tag}.db"
        for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            p.unlink(missing_ok=True)
        return f"sqlite:///{path}", lambda: [p.unlink(missing_ok=True) for p in folder.glob(f"{tag}.db*")]
    import psycopg

    name = f"zlops_scale_{os.getpid()}_{tag}"
    with psycopg.connect(dbname="postgres", autocommit=True, **PG) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(dbname="postgres", autocommit=True, **PG) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return f"postgresql+psycopg://{PG['user']}@{PG['host']}:{PG['port']}/{name}", drop


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default="sqlite,postgres")
    ap.add_argument("--series", default="1000,5000,20000")
    ap.add_argument("--nights", default="30,90,365")
    ap.add_argument("--window", type=int, default=30)
    ap.add_argument("--samples", type=int, default=10, help="raw samples per result")
    ap.add_argument("--old-subset", type=int, default=100, help="series the old per-series path is timed on")
    ap.add_argument("--old-runs", type=int, default=30, help="runs the old baseline_candidates is timed on")
    ap.add_argument("--no-old", action="store_true", help="skip the old path")
    ap.add_argument("--compare", type=int, default=0, metavar="MAX_SERIES",
                    help="also time zlops.compare_step of one night where S <= MAX_SERIES (0: never)")
    ap.add_argument("--json", type=Path, help="append each result as a JSON line to this file")
    ns = ap.parse_args(argv)
    rows = []
    print("| db | S | H | fill s | ingest s | new read s | old read s | new peak RSS MiB | old peak RSS MiB "
          "| bytes/sample | compare s (cpu) | report s (cpu) | compare+report peak RSS MiB | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for db in ns.db.split(","):
        for series in (int(s) for s in ns.series.split(",")):
            url, drop = _database(db, f"s{series}")
            try:
                filler = Filler(url, series, ns.samples)
                for nights in sorted(int(h) for h in ns.nights.split(",")):
                    t0 = time.perf_counter()
                    filler.fill(nights)
                    fill_s = time.perf_counter() - t0
                    common = [url, str(series), str(nights), str(ns.window), str(ns.samples)]
                    ingest = _child(["ingest", *common])
                    new = _child(["new", *common])
                    old = None if ns.no_old else _child(["old", *common, str(ns.old_subset), str(ns.old_runs)])
                    comp = _child(["compare", *common]) if series <= ns.compare else None
                    size = filler.size_bytes()
                    row = {"db": db, "series": series, "nights": nights, "fill_s": fill_s, "ingest": ingest,
                           "new": new, "old": old, "compare": comp,
                           "bytes_per_sample": size / (series * nights * ns.samples)}
                    rows.append(row)
                    if ns.json:
                        with ns.json.open("a") as fh:
                            fh.write(json.dumps(row) + "\n")
                    old_s = "-" if old is None else f"{old['read_s']:.2f}{'*' if old['extrapolated'] else ''}"
                    old_rss = "-" if old is None else f"{old['peak_rss_mib']:.0f}"
                    comp_s = "-" if comp is None else f"{comp['compare_s']:.2f} ({comp['compare_cpu_s']:.2f})"
                    report_s = "-" if comp is None else f"{comp['report_s']:.2f} ({comp['report_cpu_s']:.2f})"
                    comp_rss = "-" if comp is None else f"{comp['peak_rss_mib']:.0f}"
                    print(f"| {db} | {series} | {nights} | {fill_s:.0f} | {ingest['ingest_s']:.2f} "
                          f"| {new['read_s']:.2f} | {old_s} | {new['peak_rss_mib']:.0f} | {old_rss} "
                          f"| {row['bytes_per_sample']:.0f} | {comp_s} | {report_s} | {comp_rss} "
                          f"| {os.getloadavg()[0]:.1f} |", flush=True)
                filler.store.dispose()
            finally:
                drop()
    return 0


def _measure(argv: list[str]) -> None:
    what, url, series, nights, window, samples, *rest = argv
    if what == "ingest":
        out = measure_ingest(url, int(series), int(samples), int(nights))
    elif what == "new":
        out = measure_new(url, int(nights), int(window))
    elif what == "old":
        out = measure_old(url, int(series), int(nights), int(window), int(rest[0]), int(rest[1]))
    else:
        out = measure_compare(url, int(series), int(nights), int(window))
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_measure":
        _measure(sys.argv[2:])
    else:
        sys.exit(main())
