"""A real benchmark on the CPU pool beside a real CPU hog pinned to the benchmark's core: with the
contention gate at its defaults (on), the shard is INVALID with the figure, its series are INVALID
rows with the reason in every rendering, and the night is not promoted (issue 12)."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
from test_contention import detached

from zlops.config.settings import parse_config
from zlops.demo import POOL, SUITE, create_upstream, demo_config_data
from zlops.model import ShardStatus, Verdict
from zlops.steps.context import open_store
from zlops.steps.nightly import run_nightly

pytestmark = [pytest.mark.slow, pytest.mark.serial,  # a real CPU hog beside a real night: nothing else beside it
              pytest.mark.skipif(shutil.which("taskset") is None, reason="pins the benchmark with taskset")]


def test_a_night_beside_a_cpu_hog_on_its_core_is_invalid_not_improved(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    shas = create_upstream(home / "upstream")
    cpu = min(os.sched_getaffinity(0))
    data = demo_config_data(home, rounds=3, workers=2)
    suite = data["suites"][SUITE]  # type: ignore[index]
    suite["command"] = ["taskset", "-c", str(cpu), *suite["command"]]  # the benchmark runs on one core
    # the first night's baseline is measured whatever this shared CI host runs beside it
    quiet = parse_config({**data, "contention": {"gate": False}})
    n1 = run_nightly(quiet, SUITE, sha=shas[0], run_label="n1")
    assert n1.accepted and all(s.status is ShardStatus.OK for s in n1.shards)

    # the defaults (only the wait shortened): the gate is on at 25% of one CPU
    gated = parse_config({**data, "contention": {"contention_wait_s": 2}})
    hog = detached(f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass")
    try:
        n2 = run_nightly(gated, SUITE, sha=shas[1], run_label="n2")
    finally:
        os.kill(hog, signal.SIGKILL)
    (shard,) = n2.shards
    assert shard.status is ShardStatus.INVALID
    assert shard.error is not None and shard.error.startswith("host busy: other processes used ")
    assert f"% CPU of pinned CPU {cpu} (limit 25%) during the run" in shard.error
    figure = shard.error.split("used ", 1)[1].split("%", 1)[0]
    assert int(figure) > 25
    rows = n2.summary.comparisons
    assert rows and {c.verdict for c in rows} == {Verdict.INVALID}
    assert all(c.judgement.note == f"shard {POOL}/0 invalid: {shard.error}" and c.head is None for c in rows)
    assert all(c.base is not None for c in rows)  # the baseline is known; no delta is published
    assert n2.summary.overall_line() == "Overall: 0 of 0 cases improved, 0 regressed; 5 invalid"
    assert not n2.accepted
    run = open_store(gated).get_run(n2.run_key)
    assert run is not None and "no shard produced valid data (invalid)" in run.meta["promotion"]["reason"]
    # every rendering names the reason with its figure
    said = f"other processes used {figure}% CPU of pinned CPU {cpu} (limit 25%)"
    run_dir = n2.report.markdown.parent
    for name in ("report.txt", "report.md", "report.html"):
        assert said in (run_dir / name).read_text(), name
    slack = json.loads((run_dir / "slack_payload.json").read_text())
    assert said in json.dumps(slack), slack
