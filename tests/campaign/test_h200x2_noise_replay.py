"""Replay of the noise-judged campaign recorded on 2 real H200s (tests/data/campaign_h200x2/noise_2026-12-01/,
its PROVENANCE.md): NCCL and a hand-written ring all-reduce of 64 MiB at P = 1, 2, variants ring and tree,
three nights (the first commit; a docs-only commit; a commit that adds a scratch all-reduce to nccl/tree
at P > 1), ``judge: noise`` with the campaign A/B (4 interleaved pairs, alpha 0.05).

Every verdict is re-decided here from what was recorded, by today's code: the lanes' results re-parsed
and the derived series (efficiency, nccl/ring ratio) re-derived must give the values the nights judged;
the noise judge's screening of each series (its history: the earlier nights, and the earlier A/B runs as
process evidence) must give the suspects the nights had; each A/B's per-run values, through
:func:`zlops.judge.judges.confirm_suspect`, must give the verdict the night reported. And the outcome the issue
asks for: the docs night flags nothing, the slowdown night flags the slowed variant's time, bandwidth,
efficiency and ratio and nothing else.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from zlops.campaign import scaling
from zlops.config.settings import Config, parse_config
from zlops.formats import parse_results
from zlops.judge.judges import confirm_suspect, noise_judge
from zlops.model import Verdict
from zlops.stats import confirm_ab

DATA = Path(__file__).resolve().parents[1] / "data" / "campaign_h200x2" / "noise_2026-12-01"
ANNOUNCED = (Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE, Verdict.IMPROVED)
SLOWED = {("allreduce/64MiB/p2/tree/nccl", "execute_s"), ("allreduce/64MiB/p2/tree/nccl", "wall_s"),
          ("allreduce/64MiB/p2/tree/nccl", "bw_execute"), ("allreduce/64MiB/tree/nccl", "efficiency_p2"),
          ("allreduce/64MiB/p2/tree", "ratio_nccl_over_ring")}


@cache
def _config() -> Config:
    return parse_config(json.loads((DATA / "zlops.json").read_text()), source=str(DATA / "zlops.json"))


@cache
def _nights() -> dict[int, dict[str, Any]]:
    return {n["night"]: n for n in json.loads((DATA / "nights.json").read_text())}


def _rows(night: int) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["case"], r["metric"]): r for r in _nights()[night]["rows"]}


def _verdicts(night: int) -> dict[tuple[str, str], Verdict]:
    return {k: Verdict(r["verdict"]) for k, r in _rows(night).items()}


def test_the_record_holds_three_nights_of_the_whole_grid() -> None:
    assert sorted(_nights()) == [1, 2, 3]
    assert _config().judge == "noise" and _config().noise.ab_pairs == 4 and _config().noise.alpha == 0.05
    for night in (1, 2, 3):
        lanes = sorted(DATA.glob(f"night{night}-lane*.campaign.json"))
        shards = [s for f in lanes for s in json.loads(f.read_text())["shards"]]
        assert len(shards) == 8 and all(s["status"] == "ok" for s in shards), night   # every shard measured
    assert set(_verdicts(1).values()) == {Verdict.NEW}


@pytest.mark.parametrize("night", [1, 2, 3])
def test_measured_and_derived_values_replay_from_the_lanes(night: int) -> None:
    lanes = sorted(DATA.glob(f"night{night}-lane*.results.json"))
    measured = [r for f in lanes for r in parse_results("zlops-json", f)]
    campaign = _config().suites["collectives"].campaign
    assert campaign is not None
    derived = scaling.derive(measured, campaign.ratios, metric=campaign.scaling_metric)
    values = {(r.case, r.metric): r.median for r in (*measured, *derived)}
    rows = _rows(night)
    assert values.keys() == rows.keys()
    for key, value in values.items():
        assert value == pytest.approx(rows[key]["tonight"], rel=1e-9), key


def _rejudge(night: int) -> dict[tuple[str, str], tuple[Verdict, Verdict]]:
    """Per series of ``night``: (the screening's verdict, the final verdict), decided again from the record."""
    cfg = _config()
    thresholds = cfg.thresholds.to_thresholds()
    policy = cfg.noise.policy(thresholds)
    out = {}
    for key, row in _rows(night).items():
        earlier = [_rows(n)[key] for n in range(1, night) if key in _rows(n)]
        history = [r["tonight"] for r in earlier]
        # the process evidence of earlier A/Bs (zlops.judge.evidence.series_histories): both sides' runs of an A/B
        # that changed nothing, only the head's of one that confirmed a change
        processes = [v for r in earlier for v in (r["ab_head"] if Verdict(r["verdict"]).changes_level
                                                  else r["ab_base"] + r["ab_head"])]
        screened = noise_judge([row["baseline"]], [row["tonight"]], row["lower_is_better"], thresholds,
                               history=history, policy=policy, processes=processes)
        final = screened
        if row["ab_base"]:
            assert screened.verdict.awaiting_confirmation, (key, screened)
            final = confirm_suspect(screened, row["ab_base"], row["ab_head"], lower_is_better=row["lower_is_better"],
                                    policy=policy, base_label=row["reference_label"].split(",")[0])
        out[key] = (screened.verdict, final.verdict)
    return out


#: verdicts today's judge reaches differently from the recorded night, and why. Changes are judged as ratios
#: since issue 22: ring/ring's efficiency fell from 0.044485 (median of 2 nights) to 0.043168, -2.96% plain
#: (unchanged at the 3.00% threshold when recorded), +3.05% as a ratio: a suspect now, announced to nobody
CHANGED_SINCE = {(3, ("allreduce/64MiB/ring/ring", "efficiency_p2")): (Verdict.UNCHANGED, Verdict.SUSPECT)}


@pytest.mark.parametrize("night", [2, 3])
def test_every_verdict_is_decided_again_from_the_recorded_values_and_ab_runs(night: int) -> None:
    rejudged = _rejudge(night)
    recorded = dict(_verdicts(night))
    for (n, key), (then, now) in CHANGED_SINCE.items():
        if n == night:
            assert recorded[key] is then and rejudged[key][1] is now, key
            recorded[key] = now
    floor = _config().thresholds.to_thresholds().potential_pct
    changed = {k: (recorded[k], v[1]) for k, v in rejudged.items() if v[1] is not recorded[k]}
    # the other rule that changed since the recording (#22): an A/B that could not decide is no longer
    # "unchanged". Exactly those recorded `unchanged` whose A/B CI reaches beyond the floor are
    # inconclusive now and stay suspects (with the A/B's figures); every other verdict is re-decided alike
    for key, (was, now) in changed.items():
        row = _rows(night)[key]
        assert was is Verdict.UNCHANGED and now.awaiting_confirmation and row["ab_base"], (key, was, now)
        rng = confirm_ab(row["ab_base"], row["ab_head"], lower_is_better=row["lower_is_better"],
                         threshold_pct=max(row["threshold_pct"] or floor, floor), severe_pct=50.0,
                         alpha=_config().noise.alpha, equivalence_pct=floor).ci_pct
        assert rng is not None and (rng[0] <= -floor or rng[1] >= floor), (key, rng)
    for key, v in rejudged.items():
        if key not in changed:
            assert v[1] is recorded[key], key
    # an A/B ran for exactly the suspects its budget reached; the others say why they wait
    for key, (screened, final) in rejudged.items():
        if (night, key) in CHANGED_SINCE:
            continue
        row = _rows(night)[key]
        if screened.awaiting_confirmation and not row["ab_base"]:
            assert final.awaiting_confirmation and "A/B" in (row["note"] or ""), key


def test_the_docs_night_flags_nothing() -> None:
    v2 = _verdicts(2)
    assert {k: v for k, v in v2.items() if v in ANNOUNCED} == {}
    # the night had suspects (process noise: setup_s, P=1 times) and the A/B cleared them
    cleared = [k for k, r in _rows(2).items() if r["ab_base"] and Verdict(r["verdict"]) is Verdict.UNCHANGED]
    assert cleared
    ab = _nights()[2]["ab"]["h200"]
    assert ab["unit"] == "device-seconds" and ab["runs"] == 8


def test_the_slowdown_night_flags_the_slowed_variant_and_nothing_else() -> None:
    v3 = _verdicts(3)
    flagged = {k for k, v in v3.items() if v in ANNOUNCED}
    assert flagged == SLOWED, flagged
    rows = _rows(3)
    for key in SLOWED:   # each confirmed by the night's A/B, not by the night alone
        assert rows[key]["ab_base"] and v3[key] in (Verdict.REGRESSION, Verdict.SEVERE), key
    eff = rows[("allreduce/64MiB/tree/nccl", "efficiency_p2")]
    assert eff["change_pct"] < -30   # the extra all-reduce at P=2 roughly doubles t(2): E(2) falls by ~half
    ratio = rows[("allreduce/64MiB/p2/tree", "ratio_nccl_over_ring")]
    assert ratio["change_pct"] > 50
    # the untouched variant of the same commit is not flagged
    assert v3[("allreduce/64MiB/p2/ring/nccl", "execute_s")] not in ANNOUNCED
    report = (DATA / "night3.report.md").read_text()
    assert f"efficiency at P=2 fell {abs(eff['change_pct']):.1f}%" in report
