"""Campaign shards, the generator's output and the gang LPT plan (pure)."""

from __future__ import annotations

import itertools
import zlib

import pytest

from zlops.campaign.plan import CampaignCase, CampaignPlan, estimate, gang_lpt, grid_cases, make_plan, parse_generated
from zlops.config.settings import parse_config
from zlops.errors import ConfigError, ZlopsError


def _suite(**campaign: object) -> dict[str, object]:
    return {"pools": {"g": {"backend": "cpu", "devices": [0, 1]}},
            "suites": {"c": {"repo": "/x", "format": "collectives", "pools": ["g"],
                             "command": ["b", "--devices", "{devices}", "--p", "{p}", "--stack", "{stack}",
                                         "--size", "{size}", "--out", "{results}"],
                             "campaign": campaign}}}


def test_grid_expands_every_case_size_p_variant_stack() -> None:
    cfg = parse_config(_suite(grid={"cases": ["allreduce"], "p": [2, 1], "variants": ["ring", "tree"],
                                    "stacks": ["nccl", "ring"], "sizes": [1 << 20, 64 << 20]}))
    cases = grid_cases(cfg.suites["c"].campaign)
    assert len(cases) == 16
    assert {c.series_case for c in cases} >= {"allreduce/1MiB/p1/ring/nccl", "allreduce/64MiB/p2/tree/ring"}
    assert cases[0].placeholders([5]) == {"devices": "5", "device": "5", "p": "1", "variant": "ring",
                                          "stack": "nccl", "case": "allreduce", "size": str(1 << 20)}
    with pytest.raises(ValueError, match="expected 2 devices"):
        CampaignCase("a", 2).placeholders([0])


@pytest.mark.parametrize(("campaign", "command", "message"), [
    ({"grid": {"p": [1]}, "generator": ["gen"]}, None, "exactly one of grid"),
    ({"grid": {"p": [0]}}, None, "expected integers >= 1"),
    ({"grid": {"p": [1, 1]}}, None, "unique"),
    ({"grid": {"p": [1], "stacks": ["a b"]}}, None, "must match"),
    ({"grid": {"p": [1], "stacks": ["a"]}, "ratios": [["a", "b"]]}, None, "not in grid.stacks"),
    ({"grid": {"p": [1]}}, ["b", "--out", "{results}"], "must pass the shard's devices with {devices}"),
    ({"grid": {"p": [1], "sizes": [8]}}, ["b", "{devices}", "{results}"], "must pass {size}"),
])
def test_config_errors_name_the_key(campaign: dict[str, object], command: list[str] | None, message: str) -> None:
    data = _suite(**campaign)
    if command is not None:
        data["suites"]["c"]["command"] = command  # type: ignore[index]
    with pytest.raises(ConfigError, match="suites.c") as err:
        parse_config(data, source="z.yaml")
    assert message in str(err.value)


def test_campaign_placeholders_need_a_campaign() -> None:
    data = _suite(grid={"p": [1]})
    del data["suites"]["c"]["campaign"]  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"uses \{p\} but the suite has no campaign section"):
        parse_config(data)


def test_generator_output_is_validated() -> None:
    cases = parse_generated('[{"case": "allreduce", "p": 2, "stack": "hccl", "size": 256}, {"case": "x", "p": 1}]',
                            source="gen")
    assert [c.series_case for c in cases] == ["allreduce/256B/p2/default/hccl", "x/p1/default/default"]
    for text, message in [("nope", "not JSON"), ("[]", "non-empty"), ('[{"case": "a"}]', r"\[0\]\.p: Field required"),
                          ('[{"case": "a", "p": true}]', r"\[0\]\.p"), ('[{"case": "a b", "p": 1}]', r"\[0\]\.case"),
                          ('[{"case": "a", "p": 1, "rm": 1}]', "Extra inputs"),
                          ('[{"case": "a", "p": 1}, {"case": "a", "p": 1}]', "listed twice")]:
        with pytest.raises(ZlopsError, match=message):
            parse_generated(text, source="gen")


def _overlaps(placements: list) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    bad = []
    for a, b in itertools.combinations(placements, 2):
        if set(a.devices) & set(b.devices) and a.start < b.end - 1e-9 and b.start < a.end - 1e-9:
            bad.append((a.shard.series_case, b.shard.series_case))
    return bad


def test_gang_lpt_respects_p_consecutive_windows_and_never_overlaps_a_device() -> None:
    cases = [CampaignCase("c", p, v, s) for p in (1, 2, 4) for v in ("a", "b") for s in ("x", "y", "z")]
    weights = {c.shard_id: float(1 + zlib.crc32(c.shard_id.encode()) % 7) / c.p for c in cases}
    devices = [0, 1, 2, 3]
    placed, unplaced = gang_lpt(cases, devices, weights)
    assert not unplaced and len(placed) == len(cases)
    for p in placed:
        assert len(p.devices) == p.shard.p
        i = devices.index(p.devices[0])
        assert list(p.devices) == devices[i:i + p.shard.p]  # consecutive, in the pool's order
    assert _overlaps(placed) == []
    # each shard waits for exactly the last shard before it on each of its devices
    for p in placed:
        for d in p.devices:
            before = [q for q in placed if d in q.devices and q.end <= p.start + 1e-9]
            if before:
                assert max(before, key=lambda q: q.end).shard.shard_id in p.after
    plan = CampaignPlan("g", tuple(devices), tuple(placed), (), "measured")
    assert plan.makespan >= plan.lower_bound > 0
    assert plan.makespan <= 2 * plan.lower_bound  # list scheduling's bound for rigid jobs is loose; ours is far inside
    assert gang_lpt(cases, devices, weights) == (placed, [])  # deterministic


def test_single_device_shards_pack_in_parallel_and_gangs_take_every_device() -> None:
    cases = [CampaignCase("c", 1, stack=s) for s in ("a", "b")] + [CampaignCase("c", 2, stack="a")]
    placed, _ = gang_lpt(cases, [0, 1], {c.shard_id: 1.0 for c in cases})
    by = {p.shard.series_case: p for p in placed}
    assert by["c/p2/default/a"].devices == (0, 1) and by["c/p2/default/a"].start == 0.0  # widest first on ties
    assert {by["c/p1/default/a"].devices, by["c/p1/default/b"].devices} == {(0,), (1,)}
    assert by["c/p1/default/a"].start == by["c/p1/default/b"].start == 1.0


def test_the_most_device_seconds_go_first_so_a_narrow_shard_never_idles_a_gang_device() -> None:
    # the recorded 2xH200 night 3 (tests/data/campaign_h200x2): P=1 shards of ~8 s beside P=2 shards of ~8 s.
    # Placed by seconds alone, a P=1 shard went between the gangs and device 1 idled while it ran; by
    # device-seconds (seconds x P) the gangs go first and the P=1 shards then share the two devices.
    sec = {(1, "ring", "nccl"): 7.07, (1, "ring", "ring"): 7.07, (1, "tree", "nccl"): 8.12, (1, "tree", "ring"): 8.07,
           (2, "ring", "nccl"): 9.09, (2, "ring", "ring"): 8.07, (2, "tree", "nccl"): 8.06, (2, "tree", "ring"): 8.07}
    cases = {k: CampaignCase("allreduce", k[0], k[1], k[2], 64 << 20) for k in sec}
    plan = make_plan("h200", list(cases.values()), [0, 1], {cases[k].shard_id: v for k, v in sec.items()})
    gangs = [p for p in plan.placements if p.shard.p == 2]
    assert [p.start for p in plan.placements[:4]] == [g.start for g in gangs] and max(g.end for g in gangs) == \
        pytest.approx(9.09 + 8.07 + 8.06 + 8.07)
    assert sorted(len([p for p in plan.placements if p.shard.p == 1 and p.lane == d]) for d in (0, 1)) == [2, 2]
    # the lower bound is 48.455 s; placed by seconds alone the makespan was 56.55 s
    assert plan.makespan == pytest.approx(33.29 + 8.12 + 7.07)


def test_wider_than_the_pool_is_unplaced_and_said() -> None:
    plan = make_plan("g", [CampaignCase("c", 4), CampaignCase("c", 1)], [0, 1], {})
    assert [c.series_case for c in plan.unplaced] == ["c/p4/default/default"]
    assert "1 shards need more devices" in plan.summary()
    assert CampaignPlan.from_dict(plan.to_dict()) == plan
    assert plan.lane(0) and plan.lane(1) == ()


def test_weights_measured_mixed_equal() -> None:
    cases = [CampaignCase("c", 1), CampaignCase("c", 2), CampaignCase("d", 2)]
    assert estimate(cases, {})[1] == "equal"
    w, src = estimate(cases, {cases[0].shard_id: 3.0, cases[1].shard_id: 5.0})
    assert src == "mixed" and w[cases[2].shard_id] == 5.0  # a new shard weighs like the measured ones of its P
    assert estimate(cases, {c.shard_id: 1.0 for c in cases})[1] == "measured"
