"""Hold-out 5's lease 6: the lease 5 nights again on a fresh H200 under zlops 1b323fe (nights alone never confirm a
suspect whose first suspect night ran the code of the night before it: ``SAME_CODE_PENDING``), checked from the
record and, slow, replayed through the real ``run_nightly``.

The record (tests/data/flaggems_h200/holdout5_2026-12-04/lease6/, PROVENANCE.md there, "Lease 6"; written by
benchmarks/h200/holdout5_live_record.py): the same trimmed FlagGems (amin, any, maximum; float16, ``--level core``:
15 cases, 50 series), upstream and SHAs as lease 5 (A ``d706fbe``, D1 ``65adf6e`` README-only, W ``6286505``: amin's
wrapper launches its kernel once more over the first 524288 rows, +3.01% on ``amin/float16/(1024x1024x1024, 1)`` in
the ground truth), production defaults, ``kernels: triton``, ``partial_exit_codes: [1]``, no ``inert_paths``.
Nights A A A A A D1 W W over three calls on one warm machine; night 8's A/B was killed by the third call's own
``timeout`` (exit 124: the harness's budget, not zlops), so night 8 has its verdicts but no stored A/B.
``processes.tsv`` holds its 36 benchmark processes: 8 nightly shards, night 6's 10 A/B runs (D1 against A: A's code
on both sides, as no inert_paths told zlops that D1 is README-only), night 7's 12 (W against D1, the head once a
round), night 8's 5 finished runs and the one in flight when it was killed.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from dataclasses import dataclass
from typing import Any

import pytest
from flaggems_holdout import HOLDOUT5, HOLDOUT5_LEASE6, Night, replay_nights
from flaggems_replay import processes

from zlops.alerts.lifecycle import AlertState
from zlops.config.settings import NoiseConfig, ThresholdsConfig
from zlops.formats import flaggems_record
from zlops.model import Verdict
from zlops.stats.decide import SAME_CODE_PENDING

LEASE = HOLDOUT5_LEASE6.data
LEASE5 = HOLDOUT5.data
NIGHTS = ("A", "A", "A", "A", "A", "D1", "W", "W")
REPLAYED = NIGHTS[:7]            # night 8's A/B never finished live: nothing to compare a replayed one with
FIRST_W = NIGHTS.index("W") + 1  # night 7
SLOWED = HOLDOUT5.slowed_case
LOUD = {"improved", "potential", "regression", "severe"}
FLOOR = ThresholdsConfig().potential_pct
BUDGET = NoiseConfig().ab_budget_floor_s
TIME_SCALE = float(os.environ.get("ZLOPS_HOLDOUT_TIME_SCALE", "0.05"))
# live: the series whose second suspect night the same-code rule held back (suspects of A's code on nights 3, 4, 6)
HELD = {3: 16, 4: 27, 6: 10}


def _processes() -> list[dict[str, str]]:
    return processes(LEASE)


def _record(night: int) -> dict[str, Any]:
    (path,) = (LEASE / "json").glob(f"night{night}-*.json")
    return json.loads(path.read_text())


def _results(row: dict[str, str]) -> list[Any]:
    return flaggems_record.parse((LEASE / row["log"]).read_text(), source=row["log"])


def _latency(row: dict[str, str], case: str = SLOWED) -> float:
    (r,) = [r for r in _results(row) if r.case == case and r.metric == "latency"]
    return r.samples[0]


def _ab(night: int) -> list[dict[str, str]]:
    return [p for p in _processes() if p["kind"] == "ab" and p["night"] == str(night)]


def _changed(night: int, case: str, metric: str) -> bool:
    return NIGHTS[night - 1] == "W" and case == SLOWED and metric in HOLDOUT5.slowed_metrics


# --- the record, as it came from the H200 (fast) ---------------------------------------------------------------

def test_the_record_holds_every_process_of_the_lease_with_the_code_it_ran() -> None:
    procs = _processes()
    shards = [p for p in procs if p["kind"] == "night"]
    assert [p["night"] for p in shards] == [str(k) for k in range(1, 9)]
    assert [p["commit"] for p in shards] == list(NIGHTS)
    assert [p["label"] for p in shards] == ["A"] * 6 + ["W"] * 2    # D1 is README-only: A's code
    n6, n7, n8 = _ab(6), _ab(7), _ab(8)
    assert (len(n6), len(n7), len(n8)) == (10, 12, 6) and len(procs) == 8 + 10 + 12 + 6
    # night 6: D1 (head) against A, both A's code; night 7: W against D1, the head once a round; night 8: W against A
    assert {(p["side"], p["commit"], p["label"]) for p in n6} == {("A", "A", "A"), ("B", "D1", "A")}
    assert {(p["side"], p["commit"], p["label"]) for p in n7} == {("A", "D1", "A"), ("B", "W", "W")}
    assert {(p["side"], p["commit"], p["label"]) for p in n8} == {("A", "A", "A"), ("B", "W", "W")}
    assert [sum(p["side"] == "A" for p in x) for x in (n6, n7, n8)] == [5, 6, 3]
    assert all(p["folder"].endswith("A-65adf6e7f6b1") for p in n7 if p["side"] == "A")
    assert all("/ab/h200/d706fbe2a254/" in p["folder"] for p in n8)
    assert [{p["selection"] for p in x} for x in (n6, n7, n8)] == [
        {"amin or any or maximum"}, {"amin or any"}, {"amin or maximum"}]
    assert {p["lease"] for p in procs} == {"6"}
    # night 8's A/B: five runs ended (their records are here), the sixth was in flight when the call killed zlops
    assert [p["ab_interrupted"] for p in n8] == ["finished"] * 5 + ["killed"]
    assert {p["ab_interrupted"] for p in procs if p["night"] != "8" or p["kind"] == "night"} == {"-"}
    killed = n8[-1]
    assert (killed["status"], killed["rc"], killed["wall_s"], killed["log"], killed["kernels"]) == (
        "running", "-", "-", "-", "-")
    done = [p for p in procs if p["seq"] != killed["seq"]]
    assert {p["status"] for p in done} == {"ok"} and {p["rc"] for p in done} == {"1"}   # partial_exit_codes [1]
    whole = {(r.case, r.metric) for r in _results(shards[0])}
    assert len(whole) == 50 and {c.split("/")[0] for c, _ in whole} == set(HOLDOUT5.ops)
    for p in done:
        ops = set(p["selection"].split(" or "))
        got = {(r.case, r.metric) for r in _results(p)}
        assert got == {(c, m) for c, m in whole if c.split("/")[0] in ops}, p["log"]
        had = json.loads((LEASE / p["kernels"]).read_text())["kernels"]
        line = re.match(r"triton: (\d+) kernels \((\d+) compiled", p["kernels_line"])
        assert line is not None and len(had) == int(line.group(1)), p["log"]
        assert sum(k["compiled"] for k in had) == int(line.group(2)), p["log"]
    # the first night compiled all 21 kernels, W's first night its 4 new amin_kernel/fill_scalar variants, no
    # other process anything (the nights' seed, the A/B sides' shared caches)
    compiled = {p["seq"]: int(re.match(r"triton: \d+ kernels \((\d+) compiled", p["kernels_line"]).group(1))
                for p in done}
    assert {seq: k for seq, k in compiled.items() if k} == {shards[0]["seq"]: 21, shards[6]["seq"]: 4}


def test_the_upstream_and_the_kernels_are_lease_5s() -> None:
    """The same SHAs as lease 5 (the record script checked the mirror's amin.py, W.diff and log identical to
    lease5/upstream/); each kernel folder kept is lease 5's compiled code: the metadata the same, the cubins the
    same code by zlops' code hash, a few bytes apart (their source-location records)."""
    assert (LEASE / "shas.txt").read_text() == (LEASE5 / "shas.txt").read_text()
    assert (LEASE / "upstream_log.txt").read_text() == (LEASE5 / "upstream_log.txt").read_text()
    assert not (LEASE / "upstream").exists()
    lines = [line.split("\t") for line in (LEASE / "triton_cache.tsv").read_text().splitlines()]
    assert lines[0] == ["label", "cache_key", "name", "kept", "lease5"]
    keys = {(p["label"], k["cache_key"], k["name"]) for p in _processes() if p["kernels"] != "-"
            for k in json.loads((LEASE / p["kernels"]).read_text())["kernels"]}
    assert {(label, key, name) for label, key, name, _, _ in lines[1:]} == keys and len(keys) == 21 + 19
    for label, key, name, kept, versus in lines[1:]:
        assert (LEASE.parent / kept / f"{name}.json").is_file() and kept.startswith("lease6/triton_cache/")
        assert (LEASE.parent / kept).name == key
        assert versus.startswith("same code (") and "identical" not in versus, (name, versus)


def test_no_loud_verdict_and_no_confirmed_alert_on_unchanged_series_on_nights_1_to_8() -> None:
    """Done-when (a) as recorded: on all eight nights, the only loud verdicts are amin (1024x1024x1024, 1)'s latency
    and the speedup that follows it on night 7 (W's first), the only confirmed alert that latency; lease 5's
    false alarm (maximum's bimodal series severe by two W nights) did not recur."""
    loud, confirmed = [], []
    for k in range(1, 9):
        night = _record(k)
        assert night["series"] == 50, k
        loud += [(k, x["case"], x["metric"], x["verdict"]) for x in night["loud"]
                 if not _changed(k, x["case"], x["metric"])]
        confirmed += [(k, e["case"], e["metric"]) for e in night["alert_events"]
                      if e["to_state"] == "confirmed" and not _changed(k, e["case"], e["metric"])]
        counts = night["verdict_counts"]
        assert sum(counts.get(v, 0) for v in LOUD) == (2 if k == FIRST_W else 0), (k, counts)
    assert not loud and not confirmed, (loud, confirmed)
    alerts = json.loads((LEASE / "json" / "alerts_at_end.json").read_text())
    assert [(a["case"], a["metric"]) for a in alerts if a["state"] == "confirmed"] == [(SLOWED, "latency")]
    assert {a["state"] for a in alerts} <= {"new", "cleared", "confirmed"}


def test_night7_confirmed_the_change_by_an_ab_that_ran_at_the_size_the_processes_say() -> None:
    """Done-when (b): W's first night, an A/B of 12 runs (W once a round against D1, the night before; the second
    base, A, got no run) confirmed +3.10%, CI [+2.98%, +3.23%], p=0.00216: the medians of the recorded processes'
    own latencies (ground truth +3.01%), every W run slower than every D1 run."""
    night = _record(FIRST_W)
    ab = night["meta"]["ab"]["h200"]
    shas = dict(line.split() for line in (LEASE / "shas.txt").read_text().splitlines())
    assert (ab["runs"], ab["pairs"], ab["seconds"], ab["est_s"], ab["budget_s"], ab["stopped"]) == (
        12, 6, 249.43, 290.96, 300.0, "decided")
    assert (ab["bases"], ab["shared_head"], ab["outcomes"]) == (2, True, {"confirmed": 1, "inconclusive": 1})
    d1, a = ab["groups"]
    assert (d1["base"], d1["runs"], d1["outcomes"]) == (shas["D1"][:12], 6, {"confirmed": 1, "inconclusive": 1})
    assert (a["base"], a["runs"], a["stopped"]) == (shas["A"][:12], 0, "none of its suspects fit the budget")
    runs = _ab(FIRST_W)
    walls = sum(float(p["wall_s"]) for p in runs)
    assert walls <= ab["seconds"] <= walls + 1.0
    (row,) = [r for r in night["ab_rows"] if r["case"] == SLOWED and r["metric"] == "latency"]
    assert row["verdict"] == "regression" and row["note"].startswith(
        "confirmed by A/B: A/B 6+6: +3.10% worse, 95% CI of the change [+2.98%, +3.23%], p=0.00216")
    fig = row["figures"]
    base = sorted(_latency(p) for p in runs if p["side"] == "A")
    head = sorted(_latency(p) for p in runs if p["side"] == "B")
    assert sorted(fig["runs_base"]) == pytest.approx(base) and sorted(fig["runs_head"]) == pytest.approx(head)
    assert max(base) < min(head)
    assert 100 * (statistics.median(head) / statistics.median(base) - 1) == pytest.approx(3.10, abs=0.005)
    assert fig["ci_pct"] == pytest.approx([2.978, 3.233], abs=0.001) and fig["ci_pct"][0] > FLOOR
    assert fig["p_value"] == pytest.approx(0.00216, abs=1e-5)
    assert [(e["case"], e["metric"], e["to_state"], e["announced"]) for e in night["alert_events"]
            if e["to_state"] == "confirmed"] == [(SLOWED, "latency", "confirmed", True)]


@pytest.mark.parametrize(("night", "runs", "seconds", "est_s", "stopped"), [
    (6, 10, 285.5, 271.0, "budget (300 s) spent"),
    (7, 12, 249.43, 290.96, "decided"),
])
def test_every_ab_cost_what_it_was_estimated_to_within_30pct_and_its_budget(
        night: int, runs: int, seconds: float, est_s: float, stopped: str) -> None:
    """Done-when (c) as recorded: each A/B (and each of night 7's groups that ran, and its shared head) estimated
    before its first run within 30% of what its runs took, and its total within the 300 s floor. Night 6's A/B of
    D1 against A (A's code twice) spent the budget and decided nothing: its 8 suspects stayed inconclusive."""
    ab = _record(night)["meta"]["ab"]["h200"]
    assert (ab["runs"], ab["seconds"], ab["est_s"], ab["stopped"]) == (runs, seconds, est_s, stopped)
    assert ab["est_s"] == pytest.approx(ab["seconds"], rel=0.30)
    assert ab["seconds"] <= ab["budget_s"] == BUDGET
    walls = sum(float(p["wall_s"]) for p in _ab(night))
    assert len(_ab(night)) == runs and walls <= ab["seconds"] <= walls + 1.0
    for part in [*(g for g in ab.get("groups", []) if g["runs"]), *([ab["head"]] if "head" in ab else [])]:
        assert part["est_s"] == pytest.approx(part["seconds"], rel=0.30), part
    if night == 6:
        assert ab["outcomes"] == {"inconclusive": 8} and ab["base"] == _processes()[0]["sha"][:12]


def test_the_same_code_rule_held_back_second_suspect_nights_of_as_code() -> None:
    """zlops 1b323fe's rule, live: on nights 3, 4 and 6 (16, 27, 10 series) a second suspect night whose first
    suspect night (2, 3, 5) ran the code of the night before it stayed a suspect with SAME_CODE_PENDING; each was a
    suspect the night before, the same way; on night 6 the A/B (D1 against A, A's code) kept them inconclusive.
    The W nights held nothing back by it: maximum (4096x4096)'s latency, the series of lease 5's false alarm, was a
    second-night suspect on nights 7 and 8 (+53.7%, +134.3%) and stayed one for another reason (its process levels
    known from 5 processes, too few), its first suspect night being D1's (after A: another commit to zlops)."""
    for k in range(2, 9):
        night, before = _record(k), _record(k - 1)
        held = {(s["case"], s["metric"]): s["verdict"] for s in night["suspects"] if SAME_CODE_PENDING in s["note"]}
        assert len(held) == HELD.get(k, 0), (k, len(held))
        prior = {(s["case"], s["metric"]): s["verdict"] for s in before["suspects"]}
        assert all(prior.get(key) == v and v in ("suspect", "suspect_improved") for key, v in held.items()), k
        assert not any(SAME_CODE_PENDING in x["note"] for x in night["loud"]), k
        if k == 6:
            noted = {(r["case"], r["metric"]) for r in night["ab_rows"] if SAME_CODE_PENDING in r["note"]}
            assert noted == set(held)
            assert all(r["note"].startswith("A/B inconclusive, still a suspect") or r["note"].startswith("follows")
                       for r in night["ab_rows"] if (r["case"], r["metric"]) in held)
    for k in (7, 8):
        (row,) = [s for s in _record(k)["suspects"]
                  if (s["case"], s["metric"]) == ("maximum/float16/(4096x4096, 4096x4096)", "latency")]
        assert row["verdict"] == "suspect" and row["note"].startswith(
            "a second suspect night, not confirmed: the process levels are known from 5 processes"), (k, row["note"])


def test_night8_was_killed_by_the_calls_timeout_during_its_ab() -> None:
    """Night 8 (W again): its shard ran and was judged (12 suspects, nothing loud), then the A/B of W against A ran
    five runs (117 s) and was killed in the sixth by the call's own ``timeout`` after 120 s: exit 124, "zlops:
    interrupted"; the night was not accepted and no A/B was stored."""
    tsv = [line.split("\t") for line in (LEASE / "nights.tsv").read_text().splitlines()]
    assert [(r[0], r[1], r[5]) for r in tsv] == [(str(k), n, "124" if k == 8 else "0")
                                                for k, n in enumerate(NIGHTS, 1)]
    assert "night 8 (W) exit 124 wall 158 s" in (LEASE / "walls.txt").read_text()
    cli = (LEASE / "night8-W.txt").read_text().splitlines()
    assert cli[-1] == "zlops: interrupted"
    assert re.search(r"FAILED ab \[suite=flaggems commit=d706fbe\.\.6286505 device=h200/0\] after 120\.\d s", cli[-2])
    night = _record(8)
    assert (night["rc"], night["accepted"], night["series"]) == (124, False, 50)
    assert "ab" not in night["meta"] and not night["loud"] and not night["ab_rows"]
    assert night["verdict_counts"] == {"unchanged": 19, "unmeasurable": 19, "suspect": 12}
    finished = [p for p in _ab(8) if p["ab_interrupted"] == "finished"]
    assert 100 < sum(float(p["wall_s"]) for p in finished) < 120.3
    assert not any((LEASE / "night{}-{}.txt".format(k, n)).exists() for k, n in enumerate(NIGHTS[:7], 1))


# --- lease 6's nights 1-7 through the real zlops nightly (slow) -------------------------------------------------

@dataclass
class Replayed:
    nights: list[Night]
    alerts: list[Any]
    table: str


def _table(nights: list[Night]) -> str:
    out = []
    for n in nights:
        counts: dict[str, int] = {}
        for v in n.verdicts.values():
            counts[v.value] = counts.get(v.value, 0) + 1
        loud = [f"{c} {m} {v.value}" for (c, m), v in sorted(n.verdicts.items()) if v.value in LOUD]
        ab = {k: v for k, v in n.ab.items() if k not in ("observed", "run_seconds", "order", "cost_model")}
        out.append(f"night {n.index} {n.label}: {dict(sorted(counts.items()))}; loud {loud or '-'}; A/B {ab}")
        out.append(f"    served {[s['log'].rsplit('/', 1)[-1] for s in n.served]}")
    return "\n".join(out)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    tmp = tmp_path_factory.mktemp("holdout5-lease6")
    _config, store, _up, nights = replay_nights(tmp, HOLDOUT5_LEASE6, REPLAYED, time_scale=TIME_SCALE)
    alerts = list(store.alerts(suite="flaggems", states=None, limit=None))
    table = _table(nights)
    print("\n" + table)
    return Replayed(nights, alerts, table)


@pytest.mark.slow
def test_the_replay_is_served_lease_6s_processes_and_decides_as_the_live_nights(replayed: Replayed) -> None:
    """Night k gets live night k's shard; each A/B run a recorded A/B process of its code and selection (night 6's
    ten of A's code for both sides, night 7's six per side), at its real time; the verdict counts are the live
    nights', night 6's A/B decides what the live one did (8 inconclusive, the budget spent: 8 runs of the scaled
    budget here against 10 live, the replay's own overhead per run being larger), night 7's is the same 12 runs."""
    procs = {p["log"]: p for p in _processes()}
    for n in replayed.nights:
        (shard,) = [s for s in n.served if s["where"] == "night"]
        assert procs[shard["log"]]["kind"] == "night" and procs[shard["log"]]["night"] == str(n.index), n.served
        counts: dict[str, int] = {}
        for v in n.verdicts.values():
            counts[v.value] = counts.get(v.value, 0) + 1
        if n.index < 6:   # before any A/B: the live nights' counts
            assert counts == _record(n.index)["verdict_counts"], (n.index, replayed.table)
        ab = [s for s in n.served if s["where"] == "ab"]
        assert len(ab) == n.ab.get("runs", 0), (n.index, n.ab)
        assert all(procs[s["log"]]["label"] == s["label"] for s in ab), ab   # a process of the side's own code
    assert [n.index for n in replayed.nights if n.ab.get("runs", 0)] == [6, FIRST_W], replayed.table
    # night 6 (README, against A): today's judge also puts the moves the nights cannot judge to the A/B (A/B
    # candidates), live it took 8 suspects; none is decided loud, the budget is spent
    six = replayed.nights[5].ab
    assert set(six["outcomes"]) == {"inconclusive"} and six["outcomes"]["inconclusive"] >= 8, replayed.table
    assert six["stopped"] == f"budget ({BUDGET * TIME_SCALE:g} s) spent", replayed.table
    seven = replayed.nights[FIRST_W - 1].ab
    assert seven["outcomes"].get("confirmed") == 1, replayed.table


@pytest.mark.slow
def test_replayed_no_loud_verdict_and_no_confirmed_alert_on_unchanged_series(replayed: Replayed) -> None:
    """Done-when (a) replayed: over nights 1-7, nothing loud and no confirmed or announced alert but amin
    (1024x1024x1024, 1)'s latency (and its speedup) on night 7."""
    loud = [(n.index, c, m, v.value) for n in replayed.nights for (c, m), v in n.verdicts.items()
            if v.value in LOUD and not _changed(n.index, c, m)]
    announced = [(n.index, c, m, to) for n in replayed.nights for c, m, to in n.announced
                 if not _changed(n.index, c, m)]
    confirmed = [(a.case, a.metric) for a in replayed.alerts if a.state is AlertState.CONFIRMED]
    assert not (loud or announced) and confirmed == [(SLOWED, "latency")], f"{loud}\n{announced}\n{replayed.table}"


@pytest.mark.slow
def test_replayed_night7_confirms_the_change_by_an_ab_that_ran(replayed: Replayed) -> None:
    """Done-when (b) replayed: W's first night, a regression decided by the A/B, reading what the live A/B read."""
    n = replayed.nights[FIRST_W - 1]
    row = n.comparisons[(SLOWED, "latency")]
    assert row.verdict is Verdict.REGRESSION and n.ab.get("runs", 0) > 0, replayed.table
    assert row.figures is not None and row.figures.reference_label.startswith("A/B")
    assert row.judgement.note.startswith("confirmed by A/B")
    (live,) = [r for r in _record(FIRST_W)["ab_rows"] if r["case"] == SLOWED and r["metric"] == "latency"]
    # which recorded processes serve it depends on the A/Bs asked before it (night 6's, with today's candidates):
    # what they show is the live A/B's change within half a point, its CI beyond the floor
    assert len(row.figures.runs_base) >= 5 and len(row.figures.runs_head) >= 5
    assert row.figures.change_pct == pytest.approx(live["change_pct"], abs=0.5) and row.figures.ci_pct[0] > FLOOR


@pytest.mark.slow
def test_replayed_ab_estimates_within_30pct_and_budget(replayed: Replayed) -> None:
    """Done-when (c) replayed: each A/B estimated within 30% of what its runs took (each a recorded process at its
    H200 time x TIME_SCALE), within the scaled 300 s floor."""
    for n in (n for n in replayed.nights if n.ab.get("runs", 0)):
        assert float(n.ab["est_s"]) == pytest.approx(float(n.ab["seconds"]), rel=0.30), (n.index, n.ab)
        assert float(n.ab["seconds"]) <= float(n.ab["budget_s"]) == pytest.approx(BUDGET * TIME_SCALE)
        for g in n.ab.get("groups") or []:
            if g.get("runs"):
                assert float(g["est_s"]) == pytest.approx(float(g["seconds"]), rel=0.30), (n.index, g)


@pytest.mark.slow
def test_replayed_same_code_rule_holds_back_the_series_it_held_live(replayed: Replayed) -> None:
    """The rule replayed: the same series on nights 3, 4 and 6 stay suspects with SAME_CODE_PENDING."""
    for n in replayed.nights:
        held = {key for key, row in n.comparisons.items() if SAME_CODE_PENDING in (row.judgement.note or "")}
        live = {(s["case"], s["metric"]) for s in _record(n.index)["suspects"] if SAME_CODE_PENDING in s["note"]}
        assert held == live and len(held) == HELD.get(n.index, 0), (n.index, sorted(held ^ live))
        assert all(n.verdicts[key] in (Verdict.SUSPECT, Verdict.SUSPECT_IMPROVED) for key in held), n.index
