"""zlops.run.ingest.read_shard: the one reader of a finished shard's results (nightly, rescore, A/B, PR compare)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from zlops.config.settings import Config, parse_config
from zlops.model import ShardOutcome, ShardStatus
from zlops.run.ingest import read_shard


def _config(tmp_path: Path, **pool: object) -> Config:
    return parse_config({
        "home": str(tmp_path / "home"),
        "pools": {"p": {"backend": "cpu", "devices": [0], **pool}},
        "suites": {"s": {"repo": str(tmp_path / "up"), "branch": "main", "install": [], "command": ["true"],
                         "format": "zlops-json", "pools": ["p"]}}}, source="test.yaml")


def _outcome(tmp_path: Path, text: str | None, status: ShardStatus = ShardStatus.OK) -> ShardOutcome:
    art = tmp_path / "art"
    art.mkdir(exist_ok=True)
    path = None
    if text is not None:
        path = art / "results.json"
        path.write_text(text)
    now = datetime(2026, 11, 30, tzinfo=timezone.utc)
    return ShardOutcome(pool="p", device=0, backend="cpu", status=status, artifact_dir=art, exit_code=0,
                        started_at=now, ended_at=now, results_file=path)


GOOD = json.dumps({"schema_version": 1, "cases": [{"name": "add", "metric": "time", "unit": "ms",
                                                    "samples": [1.0, 1.1]}]})


def test_a_good_file_gives_its_results(tmp_path: Path) -> None:
    read = read_shard(_config(tmp_path), "s", _outcome(tmp_path, GOOD))
    assert read.usable and read.outcome.status is ShardStatus.OK
    assert [(r.case, r.samples) for r in read.results] == [("add", (1.0, 1.1))]


def test_a_malformed_or_empty_file_fails_the_shard_with_file_and_line(tmp_path: Path) -> None:
    bad = '{"schema_version": 1,\n "cases": [\n  {"name": "x", "metric": "time", "unit": "ms", "samples": ["fast"]}\n ]}\n'
    read = read_shard(_config(tmp_path), "s", _outcome(tmp_path, bad))
    assert read.outcome.status is ShardStatus.FAILED and not read.results and not read.usable
    assert read.outcome.error.startswith("malformed results: ") and "results.json:3: cases[0].samples[0]" in \
        read.outcome.error
    empty = read_shard(_config(tmp_path), "s", _outcome(tmp_path, json.dumps({"schema_version": 1, "cases": []})))
    assert empty.outcome.status is ShardStatus.FAILED and empty.outcome.error.endswith("holds no cases")


def test_a_failed_shard_is_returned_as_it_is(tmp_path: Path) -> None:
    outcome = _outcome(tmp_path, GOOD, ShardStatus.TIMEOUT)
    assert read_shard(_config(tmp_path), "s", outcome).outcome == outcome
    assert read_shard(_config(tmp_path), "s", outcome).results == ()


@pytest.mark.parametrize("limit, invalid", [(25, True), (200, False)])
def test_contention_makes_the_shard_invalid_and_keeps_its_results(tmp_path: Path, limit: float,
                                                                  invalid: bool) -> None:
    config = _config(tmp_path, max_foreign_cpu_pct=limit)
    read = read_shard(config, "s", _outcome(tmp_path, GOOD), telemetry={"foreign_cpu_mean_pct": 80.0})
    assert (read.outcome.status is ShardStatus.INVALID) is invalid
    assert len(read.results) == 1               # kept as evidence either way
    if invalid:
        assert read.outcome.error.startswith("host busy: other processes used 80% CPU (limit 25%)")
