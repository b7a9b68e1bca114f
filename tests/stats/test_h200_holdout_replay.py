"""Issue 22's acceptance on a FlagGems subset zlops was never tuned on, replayed from real H200 processes.

The data (tests/data/flaggems_h200/holdout_2026-12-01/, PROVENANCE.md there; figures in
docs/evidence/h200_holdout/README.md): mean, amax and add, float16, ``--level core``, 15 cases and 50 series;
46 fresh processes of commit A (trimmed FlagGems) and S (mean's largest shape does an extra N/50 pass)
interleaved on one H200. Ground truth from the first 6 + 6 interleaved pairs: ``mean/float16/(1024x1024x1024, 1)``
latency +2.80% (A 0.4902-0.4912 ms, S 0.5042-0.5045 ms: the ranges do not overlap); every other series has
no change by construction. A process costs ~8.6 s of start-up and ~2.3 s of exit around ~2.5-5.4 s an op.

The replay (tests/flaggems_holdout.py) runs the real ``run_nightly`` with the production defaults over nights
A, A, D1..D5 (README-only: A's processes), S, S, S; every run takes ``TIME_SCALE`` x the time the real process
took, start-up included, so the A/B's cost model and budget see the H200's proportions.

Done-when of issue 22 checked here: 0 loud verdicts and 0 confirmed alerts on unchanged series over every
night; the change confirmed on its first or second night by an A/B that ran; every A/B's estimated cost
within 30% of its realised cost; its total within its budget. Where today's main lacks the machinery the
test was marked xfail while main lacked the machinery. On main 89ee8e7 (cost model, budget floor, sequential
A/B) the change was confirmed by an A/B on S's first night, but a false severe from the nights rule remained
(mean 64x512x512, two process levels) and the cost estimate missed when a selection ran every shape of its
op; with the nights rule gated on known process levels and the cost of what a selection runs, all pass.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from flaggems_holdout import DATA, SLOWED_CASE, SLOWED_METRICS, HoldoutReplay, config_data, served
from flaggems_replay import processes

from zlops.alerts.lifecycle import AlertState
from zlops.config.settings import parse_config
from zlops.formats import flaggems_record
from zlops.model import Verdict
from zlops.steps.context import open_store
from zlops.steps.nightly import run_nightly

NIGHTS = ["A", "A", "D1", "D2", "D3", "D4", "D5", "S", "S", "S"]
FIRST_S = NIGHTS.index("S")
TIME_SCALE = float(os.environ.get("ZLOPS_HOLDOUT_TIME_SCALE", "0.05"))
LOUD = {Verdict.IMPROVED, Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE}
CONFIRMED = {Verdict.REGRESSION, Verdict.SEVERE}


def _processes() -> list[dict[str, str]]:
    return processes(DATA)


def test_the_recorded_change_is_the_ground_truth() -> None:
    """The data holds what the evidence says: 46 processes, every log parses whole (50 series a full
    process), and the slowed shape's latency is +2.6..3.0% in every A/S pairing of the first 6 + 6 pairs
    (non-overlapping ranges), while its torch reference (latency_base) does not move."""
    procs = _processes()
    assert len(procs) == 46 and all(p["rc"] == "0" for p in procs)
    by: dict[tuple[str, str], list[float]] = {}
    for p in procs:
        if p["log"] == "-":
            assert p["kind"] == "probe"
            continue
        report = flaggems_record.parse_with_report((DATA / p["log"]).read_text(), source=p["log"])
        assert not report.dropped
        if p["kind"] in ("cold", "full"):
            assert len(report.results) == 50, p["log"]
        assert 5 < float(p["startup_s"]) < float(p["wall_s"]) < 40
        if p["kind"] == "full" and int(p["seq"]) <= 14:
            for r in report.results:
                if r.case == SLOWED_CASE and r.metric in ("latency", "latency_base"):
                    by.setdefault((p["label"], r.metric), []).append(r.samples[0])
    a, s = by[("A", "latency")], by[("S", "latency")]
    assert len(a) == len(s) == 6
    assert 1.026 < min(s) / max(a) and max(s) / min(a) < 1.03
    base_a, base_s = by[("A", "latency_base")], by[("S", "latency_base")]
    assert abs(statistics.median(base_s) / statistics.median(base_a) - 1) < 0.005


@dataclass
class Night:
    index: int
    label: str
    run_key: str
    verdicts: dict[tuple[str, str], Verdict]
    comparisons: dict[tuple[str, str], Any]
    ab: dict[str, Any]                       # meta["ab"]["h200"] or {}
    served: list[dict[str, str]]             # what the replay served during this night
    announced: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class Replayed:
    nights: list[Night]
    alerts: list[Any]
    table: str


def _table(nights: list[Night]) -> str:
    out = [("night label  loud (case metric verdict change%)                         | slowed latency      | "
            "A/B runs  s    budget  estimate  served-real-s")]
    for n in nights:
        loud = [f"{c.split('/')[0]}/{c.split('/')[2]} {m} {v.value} "
                f"{(n.comparisons[(c, m)].judgement.change_pct or 0):+.1f}"
                for (c, m), v in sorted(n.verdicts.items()) if v in LOUD]
        row = n.comparisons.get((SLOWED_CASE, "latency"))
        slowed = f"{row.verdict.value} {(row.judgement.change_pct or 0):+.2f}%" if row else "-"
        est = _estimate(n.ab)
        est = "-" if est is None else f"{est:.2f}"
        real = sum(float(s["seconds"]) for s in n.served if s["where"] == "ab")
        out.append(f"{n.index:>5} {n.label:5s}  {('; '.join(loud) or '-')[:60]:60s} | {slowed:19s} | "
                   f"{n.ab.get('runs', 0):>4} {n.ab.get('seconds', 0):>6} {n.ab.get('budget_s', '-'):>7} "
                   f"{est:>9} {real:>8.1f}  {n.ab.get('outcomes', '')} {n.ab.get('stopped', '')}")
        for (c, m), v in sorted(n.verdicts.items()):
            if v in LOUD or (c, m) == (SLOWED_CASE, "latency"):
                out.append(f"        {c} {m}: {v.value}: {n.comparisons[(c, m)].judgement.note[:300]}")
    return "\n".join(out)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    tmp = tmp_path_factory.mktemp("holdout")
    up = HoldoutReplay(tmp / "up")
    state = tmp / "replay-state"
    config = parse_config(config_data(tmp / "home", up.path, state, time_scale=TIME_SCALE), source="t.yaml")
    store = open_store(config)
    nights: list[Night] = []
    for i, name in enumerate(NIGHTS):
        before = len(served(state))
        night = run_nightly(config, "flaggems", sha=up.shas[name], run_label=f"n{i}-{name}")
        assert night.ok, f"night {i}"
        comps = {(c.case, c.metric): c for c in night.summary.comparisons}
        meta = store.get_run(night.run_key).meta or {}
        announced = [(a.case, a.metric, e["to_state"]) for a, e in store.run_alert_events(night.run_key)
                     if e.get("announced")]
        nights.append(Night(i, name, night.run_key, {k: c.verdict for k, c in comps.items()}, comps,
                            dict((meta.get("ab") or {}).get("h200") or {}), served(state)[before:], announced))
    table = _table(nights)
    print("\n" + table)
    out = os.environ.get("ZLOPS_HOLDOUT_TABLE")
    if out:
        Path(out).write_text(table + "\n" + json.dumps([n.ab for n in nights], default=str) + "\n")
    return Replayed(nights, store.alerts(suite="flaggems", states=None, limit=None), table)


def _unchanged_series(case: str, metric: str, night: Night) -> bool:
    return not (night.label == "S" and case == SLOWED_CASE and metric in SLOWED_METRICS)


@pytest.mark.slow
def test_replay_serves_each_night_its_commit_and_real_time(replayed: Replayed) -> None:
    """The harness itself: every night got one whole process of its own commit's recording (A for the
    README-only commits), every A/B run a process of the side's commit, and both took the real time."""
    for n in replayed.nights:
        nightly = [s for s in n.served if s["where"] == "night"]
        assert len(nightly) == 1 and nightly[0]["label"] == ("S" if n.label == "S" else "A")
        assert nightly[0]["selection"] == "mean or amax or add" and 19 < float(nightly[0]["seconds"]) < 31
        assert len(n.comparisons) == 50
        for s in n.served:
            if s["where"] == "ab":
                assert 9 < float(s["seconds"]) < 31 and s["label"] in ("A", "S")


@pytest.mark.slow
def test_no_verdict_and_no_confirmed_alert_on_unchanged_series(replayed: Replayed) -> None:
    """Done-when 1: over every judged night, 0 improved/potential/regression/severe verdicts and 0
    confirmed (announced) alerts on series that did not change."""
    loud = [(n.index, c, m, v.value) for n in replayed.nights[1:] for (c, m), v in n.verdicts.items()
            if v in LOUD and _unchanged_series(c, m, n)]
    announced = [(n.index, c, m, to) for n in replayed.nights for c, m, to in n.announced
                 if _unchanged_series(c, m, n)]
    confirmed = [(a.case, a.metric, a.state.value) for a in replayed.alerts
                 if a.state is AlertState.CONFIRMED and not (a.case == SLOWED_CASE and a.metric in SLOWED_METRICS)]
    assert not (loud or announced or confirmed), (
        f"loud verdicts: {loud}\nannounced alert events: {announced}\nconfirmed alerts: {confirmed}\n{replayed.table}")


@pytest.mark.slow
def test_the_change_is_confirmed_on_its_first_or_second_night_by_an_ab(replayed: Replayed) -> None:
    """Done-when 2: mean (1024x1024x1024, 1) latency, +2.8% on the H200, is a regression on S's first or
    second night, decided by a same-device A/B that ran (its figures name the A/B)."""
    hits = []
    for n in replayed.nights[FIRST_S:FIRST_S + 2]:
        row = n.comparisons[(SLOWED_CASE, "latency")]
        by_ab = row.figures is not None and row.figures.reference_label.startswith("A/B")
        if row.verdict in CONFIRMED and by_ab and n.ab.get("runs", 0) > 0:
            hits.append(n.index)
            assert row.figures is not None and 1.5 < row.figures.change_pct < 4.5, replayed.table
    assert hits, replayed.table


def _estimate(ab: dict[str, Any]) -> float | None:
    """The estimate of what the whole A/B would cost, made before its first run (as report/ab_cost.py reads it)."""
    if isinstance(ab.get("est_s"), (int, float)):
        return float(ab["est_s"])
    if isinstance(ab.get("est_run_s"), (int, float)):
        return float(ab["est_run_s"]) * int(ab.get("runs") or 0)
    return None


@pytest.mark.slow
def test_every_ab_estimate_is_within_30pct_of_its_realised_cost(replayed: Replayed) -> None:
    """Done-when 3a: each night whose A/B ran recorded the cost it expected, and that estimate is within
    30% of what the runs took (zlops' own timing; the replay makes each run last the real process's time)."""
    ran = [n for n in replayed.nights if n.ab.get("runs", 0) > 0]
    assert ran, "no A/B ran on any night\n" + replayed.table
    for n in ran:
        est = _estimate(n.ab)
        assert est is not None, f"night {n.index}: no estimate in meta ab {n.ab}\n{replayed.table}"
        realised = float(n.ab["seconds"])
        assert abs(est - realised) <= 0.3 * realised, f"night {n.index}: {est} vs {realised}\n{replayed.table}"
        # and the realised cost is the real processes' cost, scaled (the replay's own overhead aside)
        real = sum(float(s["seconds"]) for s in n.served if s["where"] == "ab") * TIME_SCALE
        assert real <= realised <= real * 1.5 + 1.0, (n.index, real, realised)


@pytest.mark.slow
def test_every_ab_stays_within_its_budget(replayed: Replayed) -> None:
    """Done-when 3b: what each night's A/B spent is within the budget it was given, and some A/B ran
    (a budget that is never spent proves nothing)."""
    assert any(n.ab.get("runs", 0) > 0 for n in replayed.nights), replayed.table
    for n in replayed.nights:
        if n.ab.get("runs", 0) > 0:
            assert float(n.ab["seconds"]) <= float(n.ab["budget_s"]), f"night {n.index}\n{replayed.table}"


@pytest.mark.slow
def test_with_an_explicit_budget_the_ab_draws_real_processes_at_their_real_cost(tmp_path: Path) -> None:
    """The harness under an A/B that runs (``noise.ab_budget_s`` set, ~400 s of H200 time scaled): night S's
    A/B sides are fresh processes of A and S running only the suspects' ops, each lasting what the real
    process took (start-up included), and zlops' realised cost is the sum of those, within its budget."""
    up = HoldoutReplay(tmp_path / "up", n_docs=2)
    state = tmp_path / "replay-state"
    data = config_data(tmp_path / "home", up.path, state, time_scale=TIME_SCALE)
    data["noise"] = {**data["noise"], "ab_budget_s": 400 * TIME_SCALE}
    config = parse_config(data, source="t.yaml")
    store = open_store(config)
    for i, name in enumerate(["A", "A", "D1", "D2", "S"]):
        before = len(served(state))
        night = run_nightly(config, "flaggems", sha=up.shas[name], run_label=f"n{i}-{name}")
        assert night.ok
    ab = store.get_run(night.run_key).meta["ab"]["h200"]
    runs = [s for s in served(state)[before:] if s["where"] == "ab"]
    row = {(c.case, c.metric): c for c in night.summary.comparisons}[(SLOWED_CASE, "latency")]
    print(f"\nnight S: A/B {ab}\nslowed latency: {row.verdict.value}: {row.judgement.note}\nserved: {runs}")
    assert ab["runs"] == len(runs) >= 2 and {s["label"] for s in runs} == {"A", "S"}
    assert all(s["selection"] != "mean or amax or add" for s in runs)   # targeted: the suspects' ops only
    real = sum(float(s["seconds"]) for s in runs)
    assert all(float(s["seconds"]) > 9 for s in runs)                   # a real process's start-up included
    assert real * TIME_SCALE <= ab["seconds"] <= real * TIME_SCALE * 1.5 + 1.0
    assert ab["seconds"] <= ab["budget_s"]
