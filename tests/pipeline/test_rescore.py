"""zlops rescore: re-judge a stored run from its artifacts with today's parsers and criteria."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fake_upstream import Upstream

from zlops.config.settings import Config, parse_config
from zlops.model import CaseResult, ShardStatus, Verdict
from zlops.run import ingest as ingest_mod
from zlops.steps import rescore as rescore_mod
from zlops.steps.context import context_for, open_store
from zlops.steps.nightly import run_nightly
from zlops.steps.rescore import rescore

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
    store = open_store(config)
    ((revision, _, reason, old),) = store.archived_comparisons(n2.run_key)
    assert revision == result.revision == 1 and "rescore" in reason
    assert {c.case: c.verdict for c in old}["alpha"] is Verdict.POTENTIAL
    assert {c.case: c.verdict for c in store.comparisons(n2.run_key)}["alpha"] is Verdict.REGRESSION
    assert any("alpha (time): potential (+3.00%) -> regression (+3.00%)" in line for line in result.lines())
    # rescoring twice keeps both earlier tables
    rescore(config, n2.run_key)
    assert [r for r, *_ in store.archived_comparisons(n2.run_key)] == [1, 2]
    # a rescore that changes nothing stores nothing and adds no revision, however often it runs
    for _ in range(2):
        same = rescore(config, n2.run_key)
        assert same.revision is None and not any(c.changed for c in same.changes)
        assert "nothing changed: no archive revision added" in same.lines()[0]
    assert [r for r, *_ in store.archived_comparisons(n2.run_key)] == [1, 2]
    shown = rescore_mod.show_lines(config, n2.run_key)
    assert shown[0] == f"{n2.run_key}: 2 archived revision(s)"
    assert shown[1].startswith("  revision 1  ") and "rescore at" in shown[1]
    assert shown[1].endswith(": 1 potential, 1 unchanged") and shown[2].endswith(": 1 regression, 1 unchanged")
    assert shown[3] == "  current: 1 potential, 1 unchanged"


def test_a_fixed_parser_turns_a_failed_shard_into_data(upstream: Upstream, make_config: Callable[..., Config],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    c1 = upstream.commit(BASE)
    c2 = upstream.commit(BASE, behaviour={"0": "malformed"})
    config = make_config()
    run_nightly(config, "fake", sha=c1, run_label="n1")
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    assert n2.shards[0].status is ShardStatus.FAILED
    assert {c.verdict for c in n2.summary.comparisons} == {Verdict.FAILED}

    def lenient(fmt: str, path: object, **limits: object) -> list[CaseResult]:  # a newer adapter: "fast" is 1.0
        return [CaseResult("x", "time", "ms", True, (1.0, 1.0, 1.0))]

    monkeypatch.setattr(ingest_mod, "parse_results", lenient)  # the one reader of results files
    result = rescore(config, n2.run_key)
    assert result.reparsed == 1 and result.failed == ()
    store = open_store(config)
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
    assert f"rescored {n1.run_key}: 1 shard(s) re-parsed; nothing changed: no archive revision added" in out
    assert main(["--plain", "rescore", "--show", n1.run_key, "--config", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{n1.run_key}: 0 archived revision(s)", "  current: 2 new"]
    assert main(["--plain", "rescore", "nightly:fake:nope", "--config", str(path)]) == 1
    assert main(["--plain", "rescore", "--show", "nightly:fake:nope", "--config", str(path)]) == 1


def test_rescore_refuses_when_the_artifacts_are_gone(upstream: Upstream, make_config: Callable[..., Config],
                                                     tmp_path, capsys) -> None:
    import shutil

    import yaml

    from zlops.cli import main

    c1 = upstream.commit(BASE)
    config = make_config()
    n1 = run_nightly(config, "fake", sha=c1, run_label="n1")
    store = open_store(config)
    rows = store.comparisons(n1.run_key)
    shutil.rmtree(context_for(config, "fake", n1.run_key).run_dir)
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    assert main(["--plain", "rescore", n1.run_key, "--config", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"cannot rescore {n1.run_key}: the artifacts it would re-derive from are gone: local/0 (" in err
    assert store.comparisons(n1.run_key) == rows and store.archived_comparisons(n1.run_key) == []


def test_rescore_judges_against_the_night_s_own_baseline(upstream: Upstream,
                                                          make_config: Callable[..., Config]) -> None:
    c1 = upstream.commit(BASE)
    c2 = upstream.commit({"alpha": 1.03, "beta": 2.0})
    config = make_config()
    n1 = run_nightly(config, "fake", sha=c1, run_label="n1")
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    store = open_store(config)
    assert store.get_run(n2.run_key).meta["baseline_runs"] == {"local": [n1.run_key]}
    assert {c.case: c.verdict for c in n2.summary.comparisons}["alpha"] is Verdict.POTENTIAL
    # a later accepted run of the same commit: the newest baseline candidate for c2 from now on
    later = run_nightly(config, "fake", sha=c2, run_label="n2-again")
    assert later.accepted
    result = rescore(config, n2.run_key)
    alpha = {c.case: c for c in result.summary.comparisons}["alpha"]
    assert alpha.verdict is Verdict.POTENTIAL and alpha.base.run_key == n1.run_key
    assert result.revision is None and f"baseline: the night's own: {n1.run_key}" in result.lines()[1]


def test_rescore_keeps_the_flags_the_night_ran_with(upstream: Upstream, make_config: Callable[..., Config]) -> None:
    c1 = upstream.commit(BASE)
    c2 = upstream.commit({"alpha": 1.03, "beta": 2.0})
    config = make_config()
    run_nightly(config, "fake", sha=c1, run_label="n1")
    data = config.model_dump()
    data["suites"]["fake"]["rounds"] = 3  # another caliber, judged anyway by an explicit flag
    allowed = parse_config({**data, "allow_caliber_mismatch": True})
    n2 = run_nightly(allowed, "fake", sha=c2, run_label="n2")
    assert {c.case: c.verdict for c in n2.summary.comparisons}["alpha"] is Verdict.POTENTIAL
    store = open_store(config)
    assert store.get_run(n2.run_key).meta["compare_flags"] == {"allow_caliber_mismatch": True}
    result = rescore(parse_config(data), n2.run_key)  # today's config lacks the flag; the night had it
    assert {c.case: c.verdict for c in result.summary.comparisons}["alpha"] is Verdict.POTENTIAL
    assert result.revision is None


def test_rescore_applies_today_s_contention_limits_to_what_was_sampled(
        upstream: Upstream, make_config: Callable[..., Config]) -> None:
    c1 = upstream.commit(BASE)
    c2 = upstream.commit({"alpha": 1.03, "beta": 2.0})
    config = make_config()
    run_nightly(config, "fake", sha=c1, run_label="n1")
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    store = open_store(config)
    # what the sampler recorded beside the run: a host 1.8 cores busy with something else
    (shard,) = store.shards(n2.run_key)
    extra = store.shard_extras(n2.run_key)[(shard.pool, shard.device)]
    results = [r for _, _, r in store.results(n2.run_key)]
    store.record_shard(n2.run_key, shard, results, telemetry={**extra["telemetry"], "foreign_cpu_mean_pct": 180.0},
                       identity=extra["identity"])
    data = config.model_dump()
    data["pools"]["local"]["max_foreign_cpu_pct"] = 25
    data["contention"]["gate"] = True
    result = rescore(parse_config(data), n2.run_key)
    assert store.shards(n2.run_key)[0].status is ShardStatus.INVALID
    assert {c.verdict for c in result.summary.comparisons} == {Verdict.INVALID}
    assert all("host busy: other processes used 180% CPU (limit 25%)" in c.judgement.note
               for c in result.summary.comparisons)
    back = rescore(config, n2.run_key)  # without the limit the same samples are judged again
    assert store.shards(n2.run_key)[0].status is ShardStatus.OK
    assert {c.case: c.verdict for c in back.summary.comparisons}["alpha"] is Verdict.POTENTIAL


# --- the run's series points (the per-series median/n rows later nights' history reads) -------------------

def _stored_points(config: Config, run_key: str) -> dict[tuple[str, str, str], tuple[float, int, float | None]]:
    """The ``series_points`` rows of ``run_key`` as stored (never the history read's fallback to raw results)."""
    from sqlalchemy import text

    with open_store(config).engine.connect() as conn:
        rows = conn.execute(text(
            'SELECT series.pool, series."case", series.metric, series_points.median, series_points.n, '
            "series_points.spread_pct FROM series_points JOIN series ON series.id = series_points.series_id "
            "JOIN runs ON runs.id = series_points.run_id WHERE runs.run_key = :k"), {"k": run_key}).all()
    return {(p, c, m): (median, n, spread) for p, c, m, median, n, spread in rows}


def test_a_rescore_rewrites_the_run_s_series_points(upstream: Upstream, make_config: Callable[..., Config],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """What a rescore re-reads (samples, cases) is what the run's history points are made of: after it,
    the stored points are those of the re-read results, and the next night judges against them."""
    c1 = upstream.commit(BASE)
    config = make_config()
    n1 = run_nightly(config, "fake", sha=c1, run_label="n1")
    nightly = _stored_points(config, n1.run_key)
    assert {k[1] for k in nightly} == {"alpha", "beta"}
    # a rescore that re-reads the same numbers leaves the very points the nightly wrote
    same = rescore(config, n1.run_key)
    assert same.revision is None and _stored_points(config, n1.run_key) == nightly

    parse = ingest_mod.parse_results

    def fixed(fmt: str, path: object, **limits: object) -> list[CaseResult]:
        """A newer adapter: alpha's samples were in the wrong unit (read as ms, they are 10x)."""
        out = parse(fmt, path, **limits)  # type: ignore[arg-type]
        return [r if r.case != "alpha" else CaseResult(r.case, r.metric, r.unit, r.lower_is_better,
                                                       tuple(v * 10 for v in r.samples), r.params) for r in out]

    monkeypatch.setattr(ingest_mod, "parse_results", fixed)
    rescore(config, n1.run_key)
    points = _stored_points(config, n1.run_key)
    alpha = next(k for k in points if k[1] == "alpha")
    beta = next(k for k in points if k[1] == "beta")
    assert points[alpha][0] == pytest.approx(10 * nightly[alpha][0]) and points[alpha][1] == nightly[alpha][1]
    assert points[beta] == nightly[beta]
    # the stored row is the re-read results pooled: the same figures the rescore judged tonight's side with
    head = {(c.pool, c.case, c.metric): c.head_value for c in open_store(config).comparisons(n1.run_key)}
    assert points[alpha][0] == pytest.approx(head[alpha])
    # the next night (the old adapter back: alpha at its old 1x) judges against the rescored point
    monkeypatch.setattr(ingest_mod, "parse_results", parse)
    n2 = run_nightly(config, "fake", sha=c1, run_label="n2")
    row = {c.case: c for c in n2.summary.comparisons}["alpha"]
    assert row.base.run_key == n1.run_key and row.base.median == pytest.approx(points[alpha][0])
    assert row.verdict is Verdict.IMPROVED


def test_a_rescore_that_invalidates_a_shard_takes_its_points_out_of_history(
        upstream: Upstream, make_config: Callable[..., Config]) -> None:
    """A shard turned INVALID by today's contention limits is evidence, not history: its points go;
    judged OK again, they come back as they were."""
    c1 = upstream.commit(BASE)
    config = make_config()
    n1 = run_nightly(config, "fake", sha=c1, run_label="n1")
    nightly = _stored_points(config, n1.run_key)
    store = open_store(config)
    (shard,) = store.shards(n1.run_key)
    extra = store.shard_extras(n1.run_key)[(shard.pool, shard.device)]
    results = [r for _, _, r in store.results(n1.run_key)]
    store.record_shard(n1.run_key, shard, results, telemetry={**extra["telemetry"], "foreign_cpu_mean_pct": 180.0},
                       identity=extra["identity"])
    data = config.model_dump()
    data["pools"]["local"]["max_foreign_cpu_pct"] = 25
    data["contention"]["gate"] = True
    rescore(parse_config(data), n1.run_key)
    assert store.shards(n1.run_key)[0].status is ShardStatus.INVALID
    assert _stored_points(config, n1.run_key) == {}
    rescore(config, n1.run_key)
    assert store.shards(n1.run_key)[0].status is ShardStatus.OK
    assert _stored_points(config, n1.run_key) == nightly


def test_a_rescore_keeps_a_partial_shard_partial_and_a_crash_a_crash(upstream: Upstream,
                                                                    make_config: Callable[..., Config]) -> None:
    """A shard whose benchmark exited with one of the suite's partial_exit_codes is re-read as the night read it
    (ok, with its 'partial' note); under a suite that no longer accepts the code the exit is a crash: failed."""
    c1 = upstream.commit({**BASE, "gamma": 3.0})
    c2 = upstream.commit({"alpha": 1.5, "beta": 2.0, "gamma": 3.0}, behaviour={"0": "partial"})
    config = make_config(partial_exit_codes=[1])
    run_nightly(config, "fake", sha=c1, run_label="n1")
    n2 = run_nightly(config, "fake", sha=c2, run_label="n2")
    assert n2.shards[0].status is ShardStatus.OK
    result = rescore(config, n2.run_key)
    assert result.reparsed == 1 and result.failed == ()
    (shard,) = open_store(config).shards(n2.run_key)
    assert shard.status is ShardStatus.OK
    assert (shard.error or "").startswith("partial: the benchmark exited with code 1")
    got = {c.case: c.verdict for c in result.summary.comparisons}
    assert got["alpha"] is Verdict.REGRESSION and got["gamma"] is Verdict.MISSING
    strict = make_config()   # the code no longer accepted: the exit is a crash, whatever the file says
    again = rescore(strict, n2.run_key)
    (shard,) = open_store(strict).shards(n2.run_key)
    assert shard.status is ShardStatus.FAILED and "not in the suite's partial_exit_codes" in (shard.error or "")
    assert {c.verdict for c in again.summary.comparisons} == {Verdict.FAILED}
