"""Results already measured are never lost, and accepted results are never silently replaced (issue 14).

The benchmark counts its own runs (``BENCH_COUNT``), so "the benchmark did not run again" is
asserted from the benchmark's side, not inferred from zlops' bookkeeping.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest
import yaml
from fake_slack import TOKEN, fake_slack_server
from fake_upstream import BENCH, Upstream, config_data

from zlops.cli import app as cli
from zlops.config.settings import load_config
from zlops.model import RunStatus, ShardStatus
from zlops.steps.context import make_run_key, open_store


def pg_admin_connect() -> psycopg.Connection:
    """An autocommit admin connection to the test server (the pg_url fixture's, tests/conftest.py)."""
    return psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres", autocommit=True,
                           connect_timeout=5)

pytestmark = pytest.mark.slow

BASE = {"alpha": 1.0, "beta": 2.0}
#: the fake benchmark, which also counts its runs and can wait at a gate (to fault the database mid-run)
COUNTING_BENCH = '''import os, time
if os.environ.get("BENCH_COUNT"):
    open(os.environ["BENCH_COUNT"], "a").write("ran\\n")
gate = os.environ.get("BENCH_GATE")
if gate and not os.path.exists(gate):
    open(gate + ".started", "w").close()
    deadline = time.time() + 60
    while not os.path.exists(gate) and time.time() < deadline:
        time.sleep(0.05)
''' + BENCH


def _setup(tmp_path: Path, *, database: str | None = None, slack_url: str | None = None,
           gated: bool = False) -> tuple[Path, str, Path]:
    up = Upstream(tmp_path / "upstream")
    (up.path / "bench.py").write_text(COUNTING_BENCH)
    sha = up.commit(BASE)
    data = config_data(tmp_path / "home", up.path, database=database)
    count = tmp_path / "bench-runs.txt"
    env = {"BENCH_COUNT": str(count), **({"BENCH_GATE": str(tmp_path / "gate")} if gated else {})}
    data["suites"]["fake"]["env"] = env  # type: ignore[index]
    data["database_retry_s"] = 1
    if slack_url:
        data["slack"] = {"channel": "#perf-nightly", "base_url": slack_url}
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, sha, count


def _runs(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def _zlops_lines(err: str) -> list[str]:
    assert "Traceback" not in err, err
    return [ln for ln in err.splitlines() if ln.startswith("zlops:")]


@pytest.mark.postgres
def test_database_gone_mid_benchmark_then_rerun_ingests_the_artifacts(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, sha, count = _setup(tmp_path, database=pg_url, gated=True)
    name = pg_url.rsplit("/", 1)[1]
    gate = tmp_path / "gate"

    def take_the_database_away_while_the_benchmark_runs() -> None:
        deadline = time.monotonic() + 120
        while not Path(str(gate) + ".started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        with pg_admin_connect() as admin:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        gate.write_text("go")

    fault = threading.Thread(target=take_the_database_away_while_the_benchmark_runs, daemon=True)
    fault.start()
    argv = ["--plain", "nightly", "--config", str(cfg), "--suite", "fake", "--sha", sha, "--run-id", "n1"]
    try:
        code = cli.main(argv)
    finally:
        fault.join(5)
        with pg_admin_connect() as admin:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
    (line,) = _zlops_lines(capsys.readouterr().err)
    assert code == cli.EXIT_ERROR
    assert line.startswith("zlops: database unreachable: postgresql+psycopg://") and "refuses connections" in line
    assert "zlops nightly --suite fake --run-id n1` again" in line  # how to finish the night
    assert _runs(count) == 1
    config = load_config(cfg)
    run_key = make_run_key("nightly", "fake", "n1")
    store = open_store(config)
    assert store.get_run(run_key).status is RunStatus.RUNNING  # type: ignore[union-attr]
    assert store.results(run_key) == []  # the measurement only exists in the artifacts

    assert cli.main(argv) == cli.EXIT_OK  # the database is back: the same run id again
    assert _runs(count) == 1, "the benchmark ran again instead of its artifacts being ingested"
    run = store.get_run(run_key)
    assert run is not None and run.status is RunStatus.DONE and run.accepted
    (shard,) = store.shards(run_key)
    assert shard.status is ShardStatus.OK
    results = store.results(run_key)
    assert sorted(r.case for _, _, r in results) == ["alpha", "beta"]
    assert all(len(r.samples) == 5 for _, _, r in results)  # 0 measurements lost


def test_rerun_of_an_accepted_run_is_refused_without_replace(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    with fake_slack_server() as slack:
        cfg, sha, count = _setup(tmp_path, slack_url=slack.url)
        argv = ["--plain", "nightly", "--config", str(cfg), "--suite", "fake", "--sha", sha, "--run-id", "n1"]
        assert cli.main(argv) == cli.EXIT_OK
        capsys.readouterr()
        first = [p for p in slack.posts() if "blocks" in p]
        assert len(first) == 1 and _runs(count) == 1

        assert cli.main(argv) == cli.EXIT_USAGE
        (line,) = _zlops_lines(capsys.readouterr().err)
        assert line.startswith("zlops: refused: run nightly:fake:n1 completed") and "--replace" in line
        assert _runs(count) == 1  # nothing was measured, nothing replaced
        store = open_store(load_config(cfg))
        run = store.get_run("nightly:fake:n1")
        assert run is not None and run.accepted and run.status is RunStatus.DONE

        assert cli.main([*argv, "--replace"]) == cli.EXIT_OK
        assert _runs(count) == 2  # re-measured
        run = store.get_run("nightly:fake:n1")
        assert run is not None and run.accepted and run.meta["replace_count"] == 1
        summaries = [p for p in slack.posts() if "blocks" in p and "summary" not in str(p.get("thread_ts", ""))]
        assert len(summaries) == 2, "Slack must show the replaced numbers, not keep the old summary"
        assert "replace the earlier summary" in summaries[-1]["text"]


@pytest.mark.postgres
def test_pg_terminate_backend_during_a_nightly_is_survived(tmp_path: Path, pg_url: str) -> None:
    """Every store connection is terminated while the benchmark runs: the night still ends accepted."""
    from zlops.steps.nightly import run_nightly

    cfg, sha, count = _setup(tmp_path, database=pg_url, gated=True)
    name = pg_url.rsplit("/", 1)[1]
    gate = tmp_path / "gate"
    killed: list[int] = []

    def terminate_while_the_benchmark_runs() -> None:
        deadline = time.monotonic() + 120
        while not Path(str(gate) + ".started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        with pg_admin_connect() as admin:
            row = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s "
                                "AND pid <> pg_backend_pid()", (name,)).fetchone()
            killed.append(int(row[0]) if row else 0)
        gate.write_text("go")

    fault = threading.Thread(target=terminate_while_the_benchmark_runs, daemon=True)
    fault.start()
    result = run_nightly(load_config(cfg), "fake", sha=sha, run_label="n1")
    fault.join(5)
    assert killed and killed[0] >= 1  # the store held a connection, and lost it
    assert result.accepted and _runs(count) == 1
    results = open_store(load_config(cfg)).results(result.run_key)
    assert sum(len(r.samples) for _, _, r in results) == 2 * 5
