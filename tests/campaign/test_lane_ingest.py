"""A campaign gang shard's results file is read exactly as a plain shard's (zlops.run.ingest.read_shard).

Each case below puts one results file in a gang shard's artifact folder, beside a manifest saying the
shard finished OK (what a measured shard leaves; :func:`zlops.campaign.run.run_lane` re-uses it instead
of running the benchmark again). The lane's verdict on that shard (its row in ``campaign.json`` and
the lane's own status) must be the one :func:`zlops.run.ingest.read_shard` gives the same file read as an
ordinary shard of a plain suite in the same format on the same pool: same status, same error, word
for word. The campaign A/B (:func:`zlops.campaign.ab.run_side`) must refuse the same files, and a
contended A/B shard, with the same reason. The results files follow the fake campaign harness'
``results.json`` (tests/campaign_upstream.py), the collectives format of the real harness.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from campaign_upstream import campaign_config

from zlops.campaign import ab as campaign_ab
from zlops.campaign.plan import CampaignCase, make_plan
from zlops.campaign.run import LANE_FILE, LANE_RESULTS, run_lane, shard_dir
from zlops.config.settings import Config, parse_config
from zlops.errors import ZlopsError
from zlops.model import ShardOutcome, ShardStatus
from zlops.run.ingest import read_shard
from zlops.run.runner import MANIFEST
from zlops.steps.context import Prepared, RunContext

SHA = "c0ffee" * 6 + "abcd"
RUN_KEY = "nightly:coll:t"
CASE = CampaignCase("allreduce", 1, "ring", "nccl", 4096)
NOW = datetime(2026, 11, 30, 1, 0, tzinfo=timezone.utc)


def _run(case_id: str = "allreduce_ring_p1", **over: Any) -> dict[str, Any]:
    return {"case_id": case_id, "stack": "nccl", "correctness": "pass", "execute_s_mean": 1e-3,
            "execute_s_stdev": 0.0, "execute_s_median": 1e-3, "setup_s": 0.5, "bw_execute_mb_s": 4.096,
            "wall_s_mean": 1.1e-3, "n_warmup": 1, "n_timed": 5, "phase_means": {}, "artifact_bundle": None, **over}


def _doc(*runs: dict[str, Any]) -> str:
    case = {"variant": "ring", "p": 1, "count": 1024, "dtype": "fp32", "n_bytes": 4096}
    return json.dumps({"campaign": "t", "timestamp": "2026-11-30T00:00:00+00:00", "case": case,
                       "runs": list(runs) if runs else [_run()]}, indent=1) + "\n"


GOOD = _doc()
SMALL_MIB = 0.002  # ~2 KiB: GOOD fits, the padded file does not

#: name -> (the file, the config's results_max_mib or None for the default)
FILES: dict[str, tuple[str, float | None]] = {
    "truncated JSON": (GOOD[: len(GOOD) // 2], None),
    "a string where a number belongs": (_doc(_run(execute_s_mean="fast", execute_s_median="fast")), None),
    "not an object": ("[1, 2, 3]\n", None),
    "no runs": (_doc().replace('"runs": [', '"runs": [], "x": ['), None),
    "every run failed its correctness check": (_doc(_run(correctness="fail")), None),
    "over the size limit": (GOOD + " " * 4096, SMALL_MIB),
}


def _config(tmp_path: Path, *, max_mib: float | None = None, **pool: Any) -> Config:
    data = campaign_config(tmp_path / "home", tmp_path / "up", devices=[0, 1], locks_dir=tmp_path / "locks")
    if max_mib is not None:
        data["results_max_mib"] = max_mib
    data["pools"]["cpu2"].update(pool)  # type: ignore[index]
    # an ordinary suite in the harness' format on the same pool: how a plain shard reads the same file
    data["suites"]["plain"] = {"repo": str(tmp_path / "up"), "branch": "main", "install": [],  # type: ignore[index]
                               "command": ["python", "bench.py", "--out", "{results}"], "format": "collectives",
                               "pools": ["cpu2"]}
    return parse_config(data, source="test.yaml")


def _measured(ctx: RunContext, text: str | None, *, link_from: Path | None = None) -> ShardOutcome:
    """The gang shard's artifacts as a finished OK shard leaves them: results file and manifest."""
    art = shard_dir(ctx.shard_dir("cpu2", 0), CASE)
    art.mkdir(parents=True, exist_ok=True)
    path = art / "results.json"
    if link_from is not None:
        os.symlink(link_from, path)
    elif text is not None:
        path.write_text(text, encoding="utf-8")
    (art / MANIFEST).write_text(json.dumps({
        "manifest_version": 1, "run_key": ctx.run_key, "suite": ctx.suite_name, "commit": ctx.sha, "pool": "cpu2",
        "device": 0, "devices": [0], "backend": "cpu", "status": "ok", "error": None, "exit_code": 0,
        "started_at": NOW.isoformat(), "ended_at": NOW.isoformat(), "results_file": str(path),
        "format": "collectives"}))
    return ShardOutcome(pool="cpu2", device=0, backend="cpu", status=ShardStatus.OK, artifact_dir=art, exit_code=0,
                        started_at=NOW, ended_at=NOW, results_file=path)


def _lane(ctx: RunContext, tmp_path: Path) -> tuple[ShardOutcome, dict[str, Any]]:
    plan = make_plan("cpu2", [CASE], [0, 1], {})
    assert [p.shard for p in plan.lane(0)] == [CASE]
    prepared = Prepared(worktree=tmp_path / "wt", venv=tmp_path / "venv", env_key="k", env_reused=True,
                        env_seconds=0.0)
    lane = run_lane(ctx, "cpu2", 0, prepared, plan)  # re-uses the measured shard: no process runs
    (row,) = json.loads((lane.artifact_dir / LANE_FILE).read_text())["shards"]
    return lane, row


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_lane_fails_a_bad_gang_shard_with_the_error_a_plain_shard_gets(tmp_path: Path, name: str) -> None:
    text, max_mib = FILES[name]
    config = _config(tmp_path, max_mib=max_mib)
    ctx = RunContext(config, "coll", RUN_KEY, SHA)
    outcome = _measured(ctx, text)
    plain = read_shard(config, "plain", outcome)
    assert plain.outcome.status is ShardStatus.FAILED and plain.outcome.error and not plain.results
    lane, row = _lane(ctx, tmp_path)
    assert (row["status"], row["error"]) == (plain.outcome.status.value, plain.outcome.error)
    # the lane's only shard failed: the lane is FAILED, with that error, and writes no results file
    assert lane.status is ShardStatus.FAILED and lane.results_file is None
    assert lane.error == f"every campaign shard of the lane failed: {CASE.series_case} failed: {plain.outcome.error}"
    assert not (lane.artifact_dir / LANE_RESULTS).exists()


def test_a_results_file_linked_from_outside_the_shard_folder_is_refused_alike(tmp_path: Path) -> None:
    config = _config(tmp_path)
    ctx = RunContext(config, "coll", RUN_KEY, SHA)
    outside = tmp_path / "elsewhere.json"
    outside.write_text(GOOD, encoding="utf-8")
    outcome = _measured(ctx, None, link_from=outside)
    plain = read_shard(config, "plain", outcome)
    assert plain.outcome.status is ShardStatus.FAILED and plain.outcome.error.startswith("results refused: ")
    _, row = _lane(ctx, tmp_path)
    assert (row["status"], row["error"]) == ("failed", plain.outcome.error)


def test_a_good_gang_shard_keeps_what_a_plain_shard_reads_under_its_series(tmp_path: Path) -> None:
    config = _config(tmp_path)
    ctx = RunContext(config, "coll", RUN_KEY, SHA)
    outcome = _measured(ctx, GOOD)
    plain = read_shard(config, "plain", outcome)
    assert plain.usable
    lane, row = _lane(ctx, tmp_path)
    assert lane.status is ShardStatus.OK and row["status"] == "ok" and row["error"] is None
    # the lane file is what ingest reads (zlops-json, the suite's stored format): the same samples,
    # renamed to the shard's series, the harness' case name kept in params
    stored = read_shard(config, "coll", lane)
    assert stored.usable
    assert sorted((r.metric, r.unit, r.samples) for r in stored.results) == sorted(
        (r.metric, r.unit, r.samples) for r in plain.results)
    assert {r.case for r in stored.results} == {CASE.series_case}
    assert {r.params["harness_case"] for r in stored.results} == {r.case for r in plain.results}
    assert {r.params["campaign"]["shard_id"] for r in stored.results} == {CASE.shard_id}


def test_a_gang_shard_measuring_two_cases_is_malformed_though_a_plain_shard_may(tmp_path: Path) -> None:
    """The one rule a campaign shard adds (it measures one case) fails the shard the malformed way."""
    config = _config(tmp_path)
    ctx = RunContext(config, "coll", RUN_KEY, SHA)
    outcome = _measured(ctx, _doc(_run(), _run("allreduce_ring_p1_again")))
    assert read_shard(config, "plain", outcome).usable
    _, row = _lane(ctx, tmp_path)
    assert row["status"] == "failed"
    assert row["error"] == (f"malformed results: {outcome.results_file}: metric execute_s appears for two cases "
                            "(allreduce_ring_p1_again/nccl); a campaign shard measures one case")


# --- the campaign A/B reads its gang shards the same way ------------------------------------------------

def _ab(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, config: Config, text: str,
        telemetry: dict[str, Any]) -> tuple[ShardOutcome, Path]:
    """campaign_ab.run_side of one shard whose benchmark wrote ``text`` (the process gateway faked)."""
    ctx = RunContext(config, "coll", RUN_KEY, SHA)
    made: list[ShardOutcome] = []

    def fake_run_shard(spec: Any, **_: Any) -> ShardOutcome:
        spec.artifact_dir.mkdir(parents=True, exist_ok=True)
        path = spec.artifact_dir / "results.json"
        path.write_text(text, encoding="utf-8")
        made.append(ShardOutcome(pool=spec.pool, device=spec.device, backend="cpu", status=ShardStatus.OK,
                                 artifact_dir=spec.artifact_dir, exit_code=0, started_at=NOW, ended_at=NOW,
                                 results_file=path))
        return made[-1]

    monkeypatch.setattr(campaign_ab, "run_shard", fake_run_shard)
    monkeypatch.setattr(campaign_ab, "summarize_dir", lambda _art: dict(telemetry))
    prepared = Prepared(worktree=tmp_path / "wt", venv=tmp_path / "venv", env_key="k", env_reused=True,
                        env_seconds=0.0)
    out = tmp_path / "ab" / "run-00"
    try:
        campaign_ab.run_side(ctx, ctx, prepared, "cpu2", out, campaign_ab.ab_plan("cpu2", (CASE,), [0, 1], {}))
    except ZlopsError as exc:
        return made[-1], Path(str(exc))
    return made[-1], Path()


@pytest.mark.parametrize("name", ["truncated JSON", "every run failed its correctness check"])
def test_the_campaign_ab_refuses_a_bad_shard_with_the_plain_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                   name: str) -> None:
    config = _config(tmp_path)
    outcome, error = _ab(monkeypatch, tmp_path, config, FILES[name][0], {})
    plain = read_shard(config, "plain", outcome)
    assert str(error) == f"A/B shard {CASE.series_case} in {outcome.artifact_dir}: {plain.outcome.error}"


def test_a_contended_campaign_ab_shard_is_invalid_as_a_plain_shard_is(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    config = _config(tmp_path, contention_gate=True, max_foreign_cpu_pct=25)
    busy = {"foreign_cpu_mean_pct": 180.0}
    outcome, error = _ab(monkeypatch, tmp_path, config, GOOD, busy)
    plain = read_shard(config, "plain", outcome, telemetry=busy)
    assert plain.outcome.status is ShardStatus.INVALID and plain.outcome.error.startswith("host busy: ")
    assert str(error) == f"A/B shard {CASE.series_case} in {outcome.artifact_dir} invalid: {plain.outcome.error}"
    # and a quiet one measures
    _, error = _ab(monkeypatch, tmp_path, config, GOOD, {"foreign_cpu_mean_pct": 3.0})
    assert str(error) == "."


# --- a rescore reads a lane again from its gang shards' own files ----------------------------------------

def test_rereading_a_lane_applies_today_s_adapter_to_its_gang_shards(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The lane file holds what the night's adapter made of the gang shards' files; a rescore reads those
    files again (campaign_run.reread_lane), each as the lane read it, so a fixed adapter reaches campaigns."""
    from zlops.campaign.run import reread_lane
    from zlops.run import ingest as ingest_mod

    config = _config(tmp_path)
    ctx = RunContext(config, "coll", RUN_KEY, SHA)
    _measured(ctx, GOOD)
    lane, _ = _lane(ctx, tmp_path)
    plan = make_plan("cpu2", [CASE], [0, 1], {})
    night = {r.metric: r.samples for r in read_shard(config, "coll", lane).results}
    again, results = reread_lane(ctx, plan, lane)  # the same adapter: the same lane
    assert again == lane and {r.metric: r.samples for r in results} == night
    parse = ingest_mod.parse_results

    def newer(fmt: str, path: Path, **limits: Any) -> list[Any]:  # a newer collectives adapter: execute_s x2
        from dataclasses import replace

        out = parse(fmt, path, **limits)
        return [replace(r, samples=tuple(2 * v for v in r.samples)) if fmt == "collectives" and r.metric == "execute_s"
                else r for r in out]

    monkeypatch.setattr(ingest_mod, "parse_results", newer)
    again, results = reread_lane(ctx, plan, lane)
    assert again.status is ShardStatus.OK
    got = {r.metric: r.samples for r in results}
    assert got["execute_s"] == tuple(2 * v for v in night["execute_s"]) and got["wall_s"] == night["wall_s"]
    assert {r.case for r in results} == {CASE.series_case}
    # the lane file itself still says what the night read (a rescore writes no artifact)
    assert {r.metric: r.samples for r in read_shard(config, "coll", lane).results} == night


def test_rereading_a_lane_turns_a_night_malformed_shard_into_data_and_keeps_a_crash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from zlops.campaign.run import reread_lane
    from zlops.formats import parse_text
    from zlops.run import ingest as ingest_mod

    config = _config(tmp_path)
    ctx = RunContext(config, "coll", RUN_KEY, SHA)
    outcome = _measured(ctx, FILES["a string where a number belongs"][0])
    lane, row = _lane(ctx, tmp_path)
    plan = make_plan("cpu2", [CASE], [0, 1], {})
    assert lane.status is ShardStatus.FAILED and row["status"] == "failed"
    again, results = reread_lane(ctx, plan, lane)  # the same adapter: the same failure, word for word
    assert (again.status, again.error, results) == (lane.status, lane.error, [])
    def fixed(fmt: str, path: Path, **_: Any) -> list[Any]:  # a fixed adapter: it reads that file as GOOD's
        return parse_text(fmt, GOOD, source=str(path))

    monkeypatch.setattr(ingest_mod, "parse_results", fixed)
    again, results = reread_lane(ctx, plan, lane)
    assert again.status is ShardStatus.OK and again.error is None and {r.case for r in results} == {CASE.series_case}
    # a gang shard whose benchmark crashed stays crashed, whatever a parser would make of its file
    manifest = json.loads((outcome.artifact_dir / MANIFEST).read_text())
    (outcome.artifact_dir / MANIFEST).write_text(json.dumps({**manifest, "status": "failed", "exit_code": 3,
                                                             "error": "benchmark exited with code 3"}))
    again, results = reread_lane(ctx, plan, lane)
    assert again.status is ShardStatus.FAILED and results == []
    assert again.error == (f"every campaign shard of the lane failed: {CASE.series_case} failed: "
                           "benchmark exited with code 3")



# --- the contention gate judges each gang shard on its own telemetry -------------------------------------

OTHER = CampaignCase("allreduce", 1, "tree", "nccl", 4096)


def _fake_runs(monkeypatch: pytest.MonkeyPatch, busy: dict[str, int]) -> list[str]:
    """run_shard faked (each run writes GOOD and an OK manifest) and the shard telemetry faked: a shard
    whose id is in ``busy`` reads 180% foreign CPU for its first ``busy[id]`` runs, 3% after."""
    from zlops.campaign import run as campaign_run
    from zlops.host import telemetry

    ran: list[str] = []

    def fake_run_shard(spec: Any, **_: Any) -> ShardOutcome:
        spec.artifact_dir.mkdir(parents=True, exist_ok=True)
        path = spec.artifact_dir / "results.json"
        path.write_text(GOOD, encoding="utf-8")
        (spec.artifact_dir / MANIFEST).write_text(json.dumps({   # the manifest a finished shard leaves
            "manifest_version": 1, "run_key": spec.run_key, "commit": spec.sha, "status": "ok",
            "started_at": NOW.isoformat(), "ended_at": NOW.isoformat(), "results_file": str(path)}))
        ran.append(spec.artifact_dir.name)
        return ShardOutcome(pool=spec.pool, device=spec.device, backend="cpu", status=ShardStatus.OK,
                            artifact_dir=spec.artifact_dir, exit_code=0, started_at=NOW, ended_at=NOW,
                            results_file=path)

    def fake_summary(art: Path) -> dict[str, Any]:
        left = busy.get(art.name, 0)
        runs = ran.count(art.name)
        return {"foreign_cpu_mean_pct": 180.0 if runs <= left else 3.0}

    monkeypatch.setattr(campaign_run, "run_shard", fake_run_shard)
    monkeypatch.setattr(telemetry, "summarize_dir", fake_summary)
    return ran


def _two_shard_lane(ctx: RunContext, tmp_path: Path) -> tuple[ShardOutcome, list[dict[str, Any]]]:
    plan = make_plan("cpu2", [CASE, OTHER], [0], {})
    prepared = Prepared(worktree=tmp_path / "wt", venv=tmp_path / "venv", env_key="k", env_reused=True,
                        env_seconds=0.0)
    lane = run_lane(ctx, "cpu2", 0, prepared, plan)
    return lane, json.loads((lane.artifact_dir / LANE_FILE).read_text())["shards"]


def test_a_contended_gang_shard_runs_again_once_the_host_quiets(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    config = _config(tmp_path, contention_gate=True, max_foreign_cpu_pct=25, contention_wait_s=0)
    ctx = RunContext(config, "coll", RUN_KEY, SHA)
    ran = _fake_runs(monkeypatch, {CASE.shard_id: 1})
    lane, rows = _two_shard_lane(ctx, tmp_path)
    assert sorted(ran) == sorted([CASE.shard_id, CASE.shard_id, OTHER.shard_id])   # the busy one twice
    assert [r["status"] for r in rows] == ["ok", "ok"] and lane.status is ShardStatus.OK and lane.error is None
    # the contended attempt is kept beside the shard as evidence
    assert (lane.artifact_dir / f"{CASE.shard_id}.contended1" / "results.json").is_file()


def test_a_gang_shard_still_contended_is_invalid_alone_and_the_lane_keeps_the_others(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from zlops.steps.run_device import ingest_shard

    config = _config(tmp_path, contention_gate=True, max_foreign_cpu_pct=25, contention_wait_s=0)
    ctx = RunContext(config, "coll", RUN_KEY, SHA)
    ran = _fake_runs(monkeypatch, {CASE.shard_id: 99})
    lane, rows = _two_shard_lane(ctx, tmp_path)
    assert ran.count(CASE.shard_id) == 2 and ran.count(OTHER.shard_id) == 1
    by_case = {r["series_case"]: r for r in rows}
    assert by_case[CASE.series_case]["status"] == "invalid"
    assert by_case[CASE.series_case]["error"].startswith("host busy: other processes used 180% CPU")
    assert by_case[OTHER.series_case]["status"] == "ok"
    assert lane.status is ShardStatus.OK and CASE.series_case in (lane.error or "")
    # the lane holds the quiet shard's series only, and ingest keeps the lane OK: its merged telemetry (busy
    # because one of its shards was) no longer drops every shard of the lane (issue 22)
    assert {r.case for r in read_shard(config, "coll", lane).results} == {OTHER.series_case}
    (lane.artifact_dir / "contention.json").write_text(json.dumps({"foreign_cpu_mean_pct": 180.0}))
    monkeypatch.setattr("zlops.steps.run_device.telemetry.summarize_dir",
                        lambda _art: {"foreign_cpu_mean_pct": 180.0})
    from zlops.model import RunRecord

    ctx.store.upsert_run(RunRecord(RUN_KEY, "nightly", "coll", SHA, "main"))
    stored = ingest_shard(ctx, lane)
    assert stored.status is ShardStatus.OK
    assert {r.case for _p, _d, r in ctx.store.results(RUN_KEY)} == {OTHER.series_case}
