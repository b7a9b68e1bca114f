"""A real benchmark on the CPU pool beside a real CPU hog: the shard is INVALID with the figure, its
series are INVALID rows with the reason, and the night is not promoted (issue 12, item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_contention import hog  # noqa: F401 - the fixture: a CPU hog outside this process' tree

from zlops import pipeline
from zlops.config import parse_config
from zlops.demo import POOL, SUITE, create_upstream, demo_config_data
from zlops.model import ShardStatus, Verdict
from zlops.nightly import run_nightly

pytestmark = pytest.mark.slow


def test_a_night_beside_a_cpu_hog_is_invalid_not_improved(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    home = tmp_path / "demo"
    shas = create_upstream(home / "upstream")
    data = demo_config_data(home, rounds=3, workers=2)
    quiet = parse_config(data)
    n1 = run_nightly(quiet, SUITE, sha=shas[0], run_label="n1")  # no limit set: measured, never gated
    assert n1.accepted and all(s.status is ShardStatus.OK for s in n1.shards)

    data["pools"][POOL]["max_foreign_cpu_pct"] = 25
    limited = parse_config(data)
    request.getfixturevalue("hog")  # from here on a CPU hog competes with the benchmark
    n2 = run_nightly(limited, SUITE, sha=shas[1], run_label="n2")
    (shard,) = n2.shards
    assert shard.status is ShardStatus.INVALID
    assert shard.error is not None and shard.error.startswith("host busy: other processes used ")
    assert "% CPU (limit 25%) during the run" in shard.error
    rows = n2.summary.comparisons
    assert rows and {c.verdict for c in rows} == {Verdict.INVALID}
    assert all(c.judgement.note == f"shard {POOL}/0 invalid: {shard.error}" and c.head is None for c in rows)
    assert all(c.base is not None for c in rows)  # the baseline is known; no delta is published
    assert n2.summary.overall_line() == "Overall: 0 of 0 cases improved, 0 regressed; 5 invalid"
    assert not n2.accepted
    run = pipeline.open_store(limited).get_run(n2.run_key)
    assert run is not None and "no shard produced valid data (invalid)" in run.meta["promotion"]["reason"]
    assert "invalid" in n2.report.table and "host busy" in n2.report.markdown.read_text()
