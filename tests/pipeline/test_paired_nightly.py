"""Paired nights through the real nightly (zlops.judge.paired; issue 23): the fake upstream's scripted timings,
its commits measured beside their baseline commit in interleaved fresh processes, the contention gate
on and judging each pair (the telemetry's load figures are scripted: how busy the CI host is is not
what these tests judge)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_upstream import Upstream, config_data

import zlops.host.telemetry
import zlops.judge.paired
from zlops.config.settings import Config, parse_config
from zlops.model import ShardStatus, Verdict
from zlops.steps.context import open_store
from zlops.steps.nightly import run_nightly

pytestmark = pytest.mark.slow


def _config(tmp_path: Path, upstream: Upstream, *, judge: str = "simple", **paired: object) -> Config:
    data = config_data(tmp_path / "home", upstream.path, contention_gate=True)
    data["pools"]["local"]["measure"] = "paired"  # type: ignore[index]
    data["judge"] = judge
    data["paired"] = {"min_pairs": 5, "max_pairs": 7, "quiet_wait_s": 0, **paired}
    return parse_config(data)


def _loads(monkeypatch: pytest.MonkeyPatch, loads: list[float], then: float) -> list[float]:
    """Each run's telemetry says other processes used the next of ``loads`` (% of one CPU), then ``then``."""
    real = zlops.host.telemetry.summarize_dir
    seen: list[float] = []

    def summarize(path: Path) -> dict[str, object]:
        load = loads[len(seen)] if len(seen) < len(loads) else then
        seen.append(load)
        return {**real(path), "foreign_cpu_mean_pct": load, "foreign_top": [], "steal_max_pct": 0.0}

    monkeypatch.setattr(zlops.host.telemetry, "summarize_dir", summarize)
    monkeypatch.setattr(zlops.judge.paired, "quiet_fn", lambda config, pool: lambda: None)
    return seen


def test_a_loaded_host_alike_for_both_sides_is_judged_from_the_pairs(upstream: Upstream, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    c1 = upstream.commit({"alpha": 1.0, "beta": 2.0})
    c2 = upstream.commit({"alpha": 1.5, "beta": 2.0}, "alpha slower")
    config = _config(tmp_path, upstream)
    # far beyond the absolute limit (25% of one CPU), alike on both sides; pair 2 hit by a burst on one side
    seen = _loads(monkeypatch, [50.0, 170.0, 175.0, 10.0, 190.0], then=160.0)   # night 1 first
    n1 = run_nightly(config, "fake", sha=c1, run_label="n1")   # the first night: measured alone, gate off
    assert n1.accepted and [s.status for s in n1.shards] == [ShardStatus.OK]
    assert {c.verdict for c in n1.summary.comparisons} == {Verdict.NEW}
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    rows = {c.case: c for c in n2.summary.comparisons}
    alpha, beta = rows["alpha"], rows["beta"]
    assert alpha.verdict is Verdict.SEVERE and alpha.judgement.change_pct == pytest.approx(50.0, abs=0.5)
    meta = open_store(config).get_run(n2.run_key).meta["paired/local/0"]
    pairs = meta["pairs"]   # 5 to 7: stopped once alpha's rank test reaches alpha (scripted runs tie: p 0.0013 at 6)
    assert 5 <= pairs <= 7 and meta["base_sha"] == c1
    assert alpha.judgement.note.startswith(f"confirmed by {pairs}+{pairs} paired runs")
    assert beta.verdict is Verdict.UNCHANGED and beta.judgement.note.startswith(f"cleared by {pairs}+{pairs} paired")
    assert alpha.judgement.figures is not None and alpha.judgement.figures.reference_label.startswith(
        f"paired base {c1[:7]}")
    # tonight's shard holds the kept pairs' head runs: 5 rounds each
    (shard,) = n2.shards
    assert shard.status is ShardStatus.OK
    assert alpha.head is not None and alpha.head.n == 5 * pairs
    assert len(meta["discarded"]) == 1 and "10% CPU during the" in meta["discarded"][0]
    assert "190% during the" in meta["discarded"][0] and "(difference limit 50%)" in meta["discarded"][0]
    assert len(seen) == 1 + 2 * pairs + 2   # night 1's run, the kept pairs, the busy pair's two runs
    assert n2.accepted


def test_no_balanced_pair_within_the_budget_is_an_invalid_night_with_the_figures(
        upstream: Upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c1 = upstream.commit({"alpha": 1.0, "beta": 2.0})
    c2 = upstream.commit({"alpha": 1.0, "beta": 2.001}, "docs")
    config = _config(tmp_path, upstream, budget_s=30)
    flip = [10.0, 190.0] * 200   # every pair: one quiet run, one beside a burst
    _loads(monkeypatch, [50.0, *flip], then=10.0)
    run_nightly(config, "fake", sha=c1, run_label="n1")
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    (shard,) = n2.shards
    assert shard.status is ShardStatus.INVALID and shard.error is not None
    assert shard.error.startswith("host busy: no balanced pair of base and head runs within the paired budget "
                                  "(30 s): ")
    assert "other processes used 10% CPU during the" in shard.error and "190% during the" in shard.error
    assert {c.verdict for c in n2.summary.comparisons} == {Verdict.INVALID}
    assert not n2.accepted


def test_a_paired_pools_inconclusive_series_get_no_second_ab(upstream: Upstream, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the noise judge the pairs are the confirmation: confirm() runs no A/B for a paired pool."""
    c1 = upstream.commit({"alpha": 1.0, "beta": 2.0})
    c2 = upstream.commit({"alpha": 1.5, "beta": 2.0}, "alpha slower")
    config = _config(tmp_path, upstream, judge="noise")
    _loads(monkeypatch, [], then=100.0)
    run_nightly(config, "fake", sha=c1, run_label="n1")
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    rows = {c.case: c for c in n2.summary.comparisons}
    assert rows["alpha"].verdict is Verdict.SEVERE and rows["beta"].verdict is Verdict.UNCHANGED
    assert "ab" not in open_store(config).get_run(n2.run_key).meta
