"""zlops rescore: re-judge a stored run from its artifacts with today's parsers and criteria."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fake_upstream import Upstream

from zlops import pipeline
from zlops import rescore as rescore_mod
from zlops.config import Config, parse_config
from zlops.model import CaseResult, ShardStatus, Verdict
from zlops.nightly import run_nightly
from zlops.rescore import rescore

pytestmark = pytest.mark.slow

BASE = {"alpha": 1.0, "beta": 2.0}


def test_new_criteria_rejudge_and_the_old_verdicts_stay_beside(upstream: Upstream,
                                                               make_config: Callable[..., Config]) -> None:
    c1 = upstream.commit(BASE)
    c2 = upstream.commit({"alpha": 1.03, "beta": 2.0})
    config = make_config()
    run_nightly(config, "fake", sha=c1, run_label="n1")
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    assert {c.case: c.verdict for c in n2.summary.comparisons}["alpha"] is Verdict.POTENTIAL
    stricter = parse_config({**config.model_dump(), "thresholds": {"potential_pct": 1, "regression_pct": 2.5}})
    result = rescore(stricter, n2.run_key)
    assert {c.case: c.verdict for c in result.summary.comparisons}["alpha"] is Verdict.REGRESSION
    moved = [c for c in result.changes if c.changed]
    assert [(c.case, c.before.verdict, c.after.verdict) for c in moved] == [
        ("alpha", Verdict.POTENTIAL, Verdict.REGRESSION)]
    store = pipeline.open_store(config)
    ((revision, _, reason, old),) = store.archived_comparisons(n2.run_key)
    assert revision == result.revision == 1 and "rescore" in reason
    assert {c.case: c.verdict for c in old}["alpha"] is Verdict.POTENTIAL
    assert {c.case: c.verdict for c in store.comparisons(n2.run_key)}["alpha"] is Verdict.REGRESSION
    assert any("alpha (time): potential (+3.00%) -> regression (+3.00%)" in line for line in result.lines())
    # rescoring twice keeps both earlier tables
    rescore(config, n2.run_key)
    assert [r for r, *_ in store.archived_comparisons(n2.run_key)] == [1, 2]


def test_a_fixed_parser_turns_a_failed_shard_into_data(upstream: Upstream, make_config: Callable[..., Config],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    c1 = upstream.commit(BASE)
    c2 = upstream.commit(BASE, behaviour={"0": "malformed"})
    config = make_config()
    run_nightly(config, "fake", sha=c1, run_label="n1")
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    assert n2.shards[0].status is ShardStatus.FAILED
    assert {c.verdict for c in n2.summary.comparisons} == {Verdict.FAILED}

    def lenient(fmt: str, path: object) -> list[CaseResult]:  # a newer adapter that reads "fast" as 1.0
        return [CaseResult("x", "time", "ms", True, (1.0, 1.0, 1.0))]

    monkeypatch.setattr(rescore_mod, "parse_results", lenient)
    result = rescore(config, n2.run_key)
    assert result.reparsed == 1 and result.failed == ()
    store = pipeline.open_store(config)
    assert store.shards(n2.run_key)[0].status is ShardStatus.OK
    assert {c.case: c.verdict for c in result.summary.comparisons}["x"] is Verdict.NEW


def test_rescore_cli(upstream: Upstream, make_config: Callable[..., Config], tmp_path, capsys) -> None:
    import yaml

    from zlops.cli import main

    c1 = upstream.commit(BASE)
    config = make_config()
    n1 = run_nightly(config, "fake", sha=c1, run_label="n1")
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    assert main(["--plain", "rescore", n1.run_key, "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"rescored {n1.run_key}: 1 shard(s) re-parsed; previous verdicts kept as archive revision 1" in out
    assert main(["--plain", "rescore", "nightly:fake:nope", "--config", str(path)]) == 1
