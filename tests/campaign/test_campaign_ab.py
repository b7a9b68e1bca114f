"""The noise judge's same-gang A/B on a campaign suite (zlops.campaign.ab through zlops.judge.confirm).

Real git, real venvs, real gang-leased processes, SQLite; the fake harness (tests/campaign_upstream.py)
reports its commit's timings times a scripted per-night process noise. Nights 2 and 3 move setup_s
and P=1 execute_s of a few series by 20-30% (noise: both sides of that night's A/B see it), night 3's
commit also slows tree/nccl at P=2 by 50%: the A/B must clear every noise suspect, confirm the slowed
shard's series and the efficiency and ratio derived from it, and re-run only the shards those
suspects come from.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from campaign_upstream import CampaignUpstream, campaign_config, timings

from zlops.campaign.ab import shards_of
from zlops.campaign.plan import CampaignCase, grid_cases
from zlops.config.settings import parse_config
from zlops.model import Verdict
from zlops.steps.context import RunContext, open_store
from zlops.steps.nightly import run_nightly

GRID = dict(cases=["allreduce"], ps=[1, 2], variants=["ring", "tree"], stacks=["nccl", "ring"])
K = "allreduce/p{p}/{v}/{s}"  # the fake harness' timing / noise keys


def _shard(p: int, v: str, s: str) -> CampaignCase:
    return CampaignCase("allreduce", p, v, s, 4096)


def test_a_suspect_maps_to_the_shards_its_series_is_computed_from() -> None:
    data = campaign_config(Path("/h"), Path("/u"), devices=[0, 1], locks_dir=Path("/l"))
    shards = grid_cases(parse_config(data).suite("coll").campaign)  # type: ignore[arg-type]
    assert shards_of("allreduce/4KiB/p2/tree/nccl", "execute_s", shards) == (_shard(2, "tree", "nccl"),)
    # E(2) needs t(P_min=1) and t(2) of its (variant, stack)
    assert set(shards_of("allreduce/4KiB/tree/nccl", "efficiency_p2", shards)) == {
        _shard(1, "tree", "nccl"), _shard(2, "tree", "nccl")}
    # t(nccl) / t(ring) needs both stacks at that P and variant
    assert set(shards_of("allreduce/4KiB/p2/tree", "ratio_nccl_over_ring", shards)) == {
        _shard(2, "tree", "nccl"), _shard(2, "tree", "ring")}
    # a series no planned shard produces cannot be re-measured
    assert shards_of("allreduce/4KiB/p4/tree/nccl", "execute_s", shards) == ()
    assert shards_of("allreduce/4KiB/tree/nccl", "efficiency_p4", shards) == ()
    assert shards_of("allreduce/4KiB/p2/tree", "ratio_nccl_over_gloo", shards) == ()


def _night(config, sha: str, label: str, noise_file: Path, noise: dict[str, object]):  # type: ignore[no-untyped-def]
    noise_file.write_text(json.dumps({"jitter": 0.002, **noise}))
    return run_nightly(config, "coll", sha=sha, run_label=label)


def _verdicts(result) -> dict[tuple[str, str], Verdict]:  # type: ignore[no-untyped-def]
    return {(c.case, c.metric): c.verdict for c in result.summary.comparisons}


def _ab_shards(config, result) -> set[str]:  # type: ignore[no-untyped-def]
    """The shards each A/B run of the night ran (their artifact folders), the same in every run."""
    runs = sorted((RunContext(config, "coll", result.run_key, result.summary.sha).run_dir / "ab" / "cpu2")
                  .iterdir())
    per_run = [frozenset(d.name for d in run.iterdir() if d.is_dir()) for run in runs]
    assert len(runs) >= 8 and len(set(per_run)) == 1, per_run
    return set(per_run[0])


@pytest.mark.slow
def test_noise_judge_ab_clears_process_noise_and_confirms_the_slowed_gang_shard(tmp_path: Path) -> None:
    up = CampaignUpstream(tmp_path / "up")
    base = timings(**GRID)
    c1 = up.commit(base, "first")
    c2 = up.commit(base, "docs")
    slow = {**base, K.format(p=2, v="tree", s="nccl"): base[K.format(p=2, v="tree", s="nccl")] * 2.0}
    c3 = up.commit(slow, "tree: a second all_reduce on the multi-rank path")
    noise = tmp_path / "noise.json"
    data = campaign_config(tmp_path / "home", up.path, devices=[0, 1], locks_dir=tmp_path / "locks",
                           env={"CAMPAIGN_NOISE": str(noise)})
    data["judge"] = "noise"
    # 4 pairs reach alpha 0.05 (exact MWU 2/C(8,4) = 0.029); a budget every night's A/B fits
    # the production A/B defaults (#22): 5-8 pairs, alpha 0.002, the budget floor (300 s a device: 600 device-s) over a night
    # of a few seconds; one variant made 2x slower at P=2
    data.pop("noise", None)
    config = parse_config(data)

    n1 = _night(config, c1, "n1", noise, {})
    assert set(_verdicts(n1).values()) == {Verdict.NEW}

    # night 2, no change: the ring variant's setup 30% slower, ring/ring's P=1 execute 20% faster
    n2 = _night(config, c2, "n2", noise, {
        "setup": {K.format(p=p, v="ring", s=s): 1.3 for p in (1, 2) for s in ("nccl", "ring")},
        "execute": {K.format(p=1, v="ring", s="ring"): 0.8}})
    v2 = _verdicts(n2)
    assert {k: v for k, v in v2.items() if v is not Verdict.UNCHANGED} == {}
    # the A/B re-ran the ring variant's shards (setup suspects; E(2) and the P=1 ratio of ring/ring) only
    assert _ab_shards(config, n2) == {_shard(p, "ring", s).shard_id for p in (1, 2) for s in ("nccl", "ring")}
    ab2 = open_store(config).get_run(n2.run_key).meta["ab"]["cpu2"]  # type: ignore[union-attr]
    assert ab2["ab_suspects"] >= 6 and ab2["unit"] == "device-seconds" and len(ab2["shards"]) == 4
    cleared = [c for c in n2.summary.comparisons if c.figures and "A/B" in c.figures.reference_label]
    assert {(c.case, c.metric) for c in cleared} >= {
        ("allreduce/4KiB/p1/ring/nccl", "setup_s"), ("allreduce/4KiB/p2/ring/ring", "setup_s"),
        ("allreduce/4KiB/p1/ring/ring", "execute_s")}
    # the efficiency is not A/B'd on its own (issue 22): it follows the timings the A/B cleared
    eff = next(c for c in n2.summary.comparisons if (c.case, c.metric) == ("allreduce/4KiB/ring/ring", "efficiency_p2"))
    assert eff.verdict is Verdict.UNCHANGED and "p1/ring/ring" in eff.follows, eff.judgement

    # night 3: the commit slows tree/nccl at P=2; noise moves ring/nccl's P=1 setup and execute by -25%
    n3 = _night(config, c3, "n3", noise, {
        "setup": {K.format(p=1, v="ring", s="nccl"): 0.75}, "execute": {K.format(p=1, v="ring", s="nccl"): 0.75}})
    flagged = {k: v for k, v in _verdicts(n3).items() if v is not Verdict.UNCHANGED}
    assert set(flagged) == {
        ("allreduce/4KiB/p2/tree/nccl", "execute_s"), ("allreduce/4KiB/p2/tree/nccl", "wall_s"),
        ("allreduce/4KiB/p2/tree/nccl", "bw_execute"), ("allreduce/4KiB/tree/nccl", "efficiency_p2"),
        ("allreduce/4KiB/p2/tree", "ratio_nccl_over_ring")}, flagged
    assert all(v.flagged and not v.awaiting_confirmation for v in flagged.values()), flagged
    # the slowed shard and the noisy ring/nccl P=1 shard: only the timings are A/B'd (issue 22); their E(2)
    # and ratio follow them, so their partner shards are not re-run any more (6 shards a run before)
    # (with the production budget floor the A/B also affords the night's other, milder suspects' shards)
    ran = _ab_shards(config, n3)
    assert ran >= {s.shard_id for s in (_shard(2, "tree", "nccl"), _shard(1, "ring", "nccl"))}, ran
    assert _shard(1, "tree", "ring").shard_id not in ran and _shard(2, "tree", "ring").shard_id not in ran
    slowed = next(c for c in n3.summary.comparisons
                  if (c.case, c.metric) == ("allreduce/4KiB/p2/tree/nccl", "execute_s"))
    assert slowed.figures is not None and "A/B" in slowed.figures.reference_label
    assert re.search(r"runs of \d gang shards, \d+ device-s \(estimated \d+\), budget 600 device-s\]",
                     slowed.judgement.note), slowed.judgement.note
    eff = next(c for c in n3.summary.comparisons if c.metric == "efficiency_p2" and c.case.endswith("tree/nccl"))
    assert eff.figures is not None and "p2/tree/nccl" in eff.follows and eff.verdict is slowed.verdict
    assert eff.figures.change_pct == pytest.approx((1 / 2.0 - 1) * 100, abs=1.0)
    md = n3.report.markdown.read_text()
    assert f"efficiency at P=2 fell {abs(eff.figures.change_pct):.1f}%" in md and "scaling regression" in md
    # the alert announcement says it in the scaling wording too
    store = open_store(config)
    sent = json.dumps([item.payload for item in store.outbox_items(run_key=n3.run_key, statuses=("pending", "failed", "sent"))])
    assert f"efficiency at P=2 fell {abs(eff.figures.change_pct):.1f}%" in sent
    assert "nccl/ring time ratio at P=2 rose" in sent


def test_the_budget_takes_the_most_severe_suspects_whose_shards_fit_and_free_riders() -> None:
    from zlops.campaign.ab import choose
    from zlops.model import Comparison, Judgement

    shards = [_shard(p, v, s) for p in (1, 2) for v in ("ring", "tree") for s in ("nccl", "ring")]
    cost = {s.shard_id: 10.0 * s.p for s in shards}  # device-seconds: a P=2 shard costs twice

    def suspect(case: str, metric: str) -> Comparison:
        return Comparison("coll", "cpu2", case, metric, "s", True, None, (1.0,), Judgement(Verdict.SUSPECT, 9, 9, 2))

    eff = suspect("allreduce/4KiB/tree/nccl", "efficiency_p2")          # p1 + p2 tree/nccl: 30
    big = suspect("allreduce/4KiB/p2/ring", "ratio_nccl_over_ring")     # p2 ring/nccl + p2 ring/ring: 40
    rider = suspect("allreduce/4KiB/p2/tree/nccl", "wall_s")            # already in eff's shards: 0 more
    small = suspect("allreduce/4KiB/p1/ring/ring", "setup_s")           # 10
    unknown = suspect("allreduce/4KiB/p8/ring/ring", "setup_s")         # no planned shard
    # 2 pairs x (30 + 10) = 80 fits 100 with the 25% headroom; big would make it 2 x 70 = 140
    chosen, run, run_s = choose([unknown, eff, big, rider, small], shards, cost, seconds=100, min_pairs=1)
    assert chosen == [eff, rider, small] and run_s == 40
    # the headroom: 80 device-seconds of pairs do not fit 99 (realised runs wander above their estimate)
    chosen, _, run_s = choose([unknown, eff, big, rider, small], shards, cost, seconds=99, min_pairs=1)
    assert chosen == [eff, rider] and run_s == 30
    assert run == (_shard(1, "ring", "ring"), _shard(1, "tree", "nccl"), _shard(2, "tree", "nccl"))
    # nothing fits: the most severe re-measurable suspect alone (its A/B is then skipped, with the reason)
    chosen, run, run_s = choose([unknown, big, eff], shards, cost, seconds=10, min_pairs=1)
    assert chosen == [big] and run_s == 40 and len(run) == 2


def test_against_two_bases_the_head_runs_a_shard_once_for_both(tmp_path: Path) -> None:
    """The gloo campaign on the H200 host (run 5, night 5): the slowed shard's wall_s against last night's commit and
    its execute_s, carried over, against an older one. Each base's A/B ran the shard's head runs of its own, and
    the older base's got 161 of 600 device-s, too few. In one A/B against both bases a round is the head's run of
    the union of the chosen suspects' shards plus each base's run of its own: the carried suspect of the same
    shard adds only its base's runs (zlops.judge.confirm.choose_bases, with the campaign's headroom)."""
    from dataclasses import replace

    from zlops.campaign.ab import HEADROOM, CampaignCosting
    from zlops.judge.confirm import choose_bases, round_cost
    from zlops.model import BaselinePoint, Comparison, Judgement

    shards = tuple(_shard(p, v, s) for p in (1, 2) for v in ("ring", "tree") for s in ("nccl", "ring"))
    costing = CampaignCosting(night_s=100.0, planned=shards, raw={s.shard_id: 10.0 * s.p for s in shards},
                              factor=1.0, learnt="", nights=1, devices=(0, 1))
    config = parse_config(campaign_config(tmp_path / "home", tmp_path / "up", devices=[0, 1], locks_dir=tmp_path / "l"))
    ctx = RunContext(config, "coll", "nightly:coll:3", "c" * 40)

    def suspect(case: str, metric: str, worse: float, base: str) -> Comparison:
        return replace(Comparison("coll", "cpu2", case, metric, "s", True, BaselinePoint("r", base, "s", 1.0, 1), (1.0,),
                                  Judgement(Verdict.SUSPECT, worse, worse, 2)))

    newest, older = "b" * 40, "a" * 40
    wall = suspect("allreduce/4KiB/p2/tree/nccl", "wall_s", 84.0, newest)
    other = suspect("allreduce/4KiB/p1/ring/nccl", "execute_s", 9.0, newest)
    execute = suspect("allreduce/4KiB/p2/tree/nccl", "execute_s", 156.0, older)
    # a round of the three: head p2/tree/nccl + p1/ring/nccl (30), newest base both (30), older base p2 (20)
    assert round_cost(ctx, costing, {newest: [wall, other], older: [execute]}) == 80.0
    budget = 5 * 80.0 * HEADROOM   # 5 rounds of all three fit; two A/Bs of their own would need 5 x (60 + 40)
    chosen = choose_bases(ctx, costing, [(newest, [wall, other]), (older, [execute])], budget_s=budget)
    assert chosen == {newest: [wall, other], older: [execute]}
    # a little less: the newest base's suspects first, the carried one is left for the next night
    chosen = choose_bases(ctx, costing, [(newest, [wall, other]), (older, [execute])], budget_s=budget - 1)
    assert chosen == {newest: [wall, other]}


def test_an_ab_run_packs_its_shards_over_the_pool_like_a_night_and_the_same_for_both_sides() -> None:
    from zlops.campaign.ab import ab_plan

    shards = [_shard(p, v, s) for p in (1, 2) for v in ("ring", "tree") for s in ("nccl", "ring")]
    cost = {s.shard_id: 8.0 * s.p if s.p == 2 else 7.0 for s in shards}   # device-seconds, as measured tonight
    plan = ab_plan("cpu2", shards, [0, 1], cost)
    assert plan == ab_plan("cpu2", list(reversed(shards)), [0, 1], cost)   # deterministic: base and head alike
    by_id = {p.shard.shard_id: p for p in plan.placements}
    assert all(by_id[s.shard_id].devices == (0, 1) for s in shards if s.p == 2)
    # the four P=1 shards share the two devices (two each), after the gangs: 4 x 8 + 2 x 7 seconds, not 4 x 8 + 4 x 7
    assert sorted(p.devices for p in plan.placements if p.shard.p == 1) == [(0,), (0,), (1,), (1,)]
    assert plan.makespan == pytest.approx(4 * 8 + 2 * 7)
    # a shard the pool is too small for is left out of the plan (run_side refuses such a plan)
    assert ab_plan("cpu2", [_shard(2, "ring", "nccl")], [0], cost).unplaced == (_shard(2, "ring", "nccl"),)


def test_run_packed_runs_lanes_in_parallel_never_two_shards_on_a_device_and_keeps_going_past_a_failure() -> None:
    import threading
    import time as _time

    from zlops.campaign.ab import ab_plan, run_packed

    shards = [_shard(p, v, s) for p in (1, 2) for v in ("ring", "tree") for s in ("nccl", "ring")]
    plan = ab_plan("cpu2", shards, [0, 1], {s.shard_id: 1.0 * s.p for s in shards})
    lock = threading.Lock()
    busy: dict[int, str] = {}
    spans: dict[str, tuple[float, float]] = {}
    clashes: list[str] = []

    def one(pl):  # type: ignore[no-untyped-def]
        with lock:
            clashes.extend(f"{pl.shard.shard_id} on {d} beside {busy[d]}" for d in pl.devices if d in busy)
            busy.update({d: pl.shard.shard_id for d in pl.devices})
        t0 = _time.monotonic()
        _time.sleep(0.05)
        with lock:
            for d in pl.devices:
                del busy[d]
        spans[pl.shard.shard_id] = (t0, _time.monotonic())
        if pl.shard == _shard(2, "tree", "ring"):
            raise RuntimeError("this shard failed")
        return pl.shard.series_case

    out = run_packed(plan, one)
    assert not clashes, clashes
    assert [p for p, _ in out] == list(plan.placements)   # every shard, in placing order
    failed = [(p.shard, r) for p, r in out if isinstance(r, Exception)]
    assert len(failed) == 1 and failed[0][0] == _shard(2, "tree", "ring")
    assert {r for _, r in out if not isinstance(r, Exception)} == {
        s.series_case for s in shards if s != _shard(2, "tree", "ring")}
    # each shard started after the shards planned before it on its devices had ended
    for p in plan.placements:
        for before in p.after:
            assert spans[p.shard.shard_id][0] >= spans[before][1]
    # the P=1 shards of the two lanes overlapped in time (lanes run in parallel)
    p1 = [spans[s.shard_id] for s in shards if s.p == 1]
    assert any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(p1) for b in p1[i + 1:])


def test_the_gang_estimate_learns_what_earlier_campaign_abs_realised(tmp_path: Path) -> None:
    """A campaign A/B run's estimate is tonight's device-seconds of its shards times the median
    realised/estimated ratio of the pool's earlier A/Bs (issue 22: gloo on 2 shared cores, +42% and +25%
    realised, and the A/B chosen for 5 pairs stopped at 4)."""
    from zlops.campaign.ab import realised_factor
    from zlops.model import RunRecord

    data = campaign_config(tmp_path / "home", tmp_path / "up", devices=[0, 1], locks_dir=tmp_path / "locks")
    config = parse_config(data)
    ctx = RunContext(config, "coll", "nightly:coll:n4", "4" * 40)
    store = open_store(config)
    assert realised_factor(ctx, "cpu2") == (1.0, "")   # nothing learnt yet: tonight's device-seconds as they are
    for i, (est, real) in enumerate([(24.49, 34.85), (29.48, 36.84), (10.0, 50.0)], start=1):
        store.upsert_run(RunRecord(f"nightly:coll:n{i}", "nightly", "coll", str(i) * 40, "main", meta={"ab": {
            "cpu2": {"unit": "device-seconds", "est_run_s": est * 7, "est_raw_run_s": est, "realised_run_s": real},
            "other": {"unit": "device-seconds", "est_run_s": 1.0, "realised_run_s": 9.0}}}))
    # one-device A/Bs and tonight's own entry do not count
    store.upsert_run(RunRecord("nightly:coll:n0", "nightly", "coll", "0" * 40, "main",
                               meta={"ab": {"cpu2": {"est_run_s": 1.0, "realised_run_s": 9.0}}}))
    store.upsert_run(RunRecord(ctx.run_key, "nightly", "coll", ctx.sha, "main", meta={"ab": {
        "cpu2": {"unit": "device-seconds", "est_run_s": 1.0, "realised_run_s": 3.0}}}))
    factor, basis = realised_factor(ctx, "cpu2")
    assert factor == pytest.approx(34.85 / 24.49) and basis == "3 earlier A/Bs"   # the median, 5x clamped out
    store.upsert_run(RunRecord("nightly:coll:n9", "nightly", "coll", "9" * 40, "main", meta={"ab": {
        "cpu2": {"unit": "device-seconds", "est_run_s": 1.0, "realised_run_s": 9.0}}}))
    store.upsert_run(RunRecord("nightly:coll:n8", "nightly", "coll", "8" * 40, "main", meta={"ab": {
        "cpu2": {"unit": "device-seconds", "est_run_s": 1.0, "realised_run_s": 9.0}}}))
    assert realised_factor(ctx, "cpu2")[0] == 3.0   # bounded
    for key in ("n1", "n2", "n3", "n8", "n9"):   # runs faster than estimated never shrink the estimate
        store.upsert_run(RunRecord(f"nightly:coll:{key}", "nightly", "coll", key[1] * 40, "main", meta={"ab": {
            "cpu2": {"unit": "device-seconds", "est_raw_run_s": 16.0, "realised_run_s": 8.5}}}))
    assert realised_factor(ctx, "cpu2") == (1.0, "5 earlier A/Bs")
