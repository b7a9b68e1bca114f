"""The seventh FlagGems hold-out (cos, gelu, softmax under FlagGems' graph timer, ``--mode cudagraph``): its ground
truth, the kernel-vs-graph timer comparison and its live nights as recorded, and the nights replayed through the real
``run_nightly``, each replayed run taking the time the real process took (start-up included).

The record (tests/data/flaggems_h200/holdout7_2026-12-06/, PROVENANCE.md there): cos, gelu and softmax of a trimmed
FlagGems (float16, ``--level core``: 15 cases, 55 series, 30 of them counted by coverage: latency and torch's
latency_base; speedup, tflops and gbps follow latency), never run by zlops before, timed with
``triton.testing.do_bench_cudagraph``. The change W: cos of at most 65536 elements goes through a new pointwise
kernel that evaluates a 16-term series (one dependent FMA a term): only the launch-bound ``cos/float16/(64x64)``
(~1.34 us under the graph timer) takes it. Its ground truth (``groundtruth/sel``, one process each, before any night):
+5.07%; the nights' interleaved A/B runs (4 of A, 6 of W): +4.81%. Larger than the ~3% asked: the smallest of the
three candidates measured (16, 32, 48 terms), and the device time left no second round for a smaller one.

The nights (``live/``): A x 7 then W on one H100 (call 2 of the nights), W again on a fresh H100 (call 3), zlops
c1f9eb3 with the production defaults, ``kernels: triton``. Both W nights' A/Bs were cut by the device call's own time
limit after 5 finished runs (the harness's knob ``AB_RESERVE_S=0`` let night 8 start with 223 s left): the live
record has the change as a suspect on both W nights and no A/B verdict. The replay gives the A/B the recorded runs
and the production budget (scaled), which is what the live nights lacked.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flaggems_holdout import DATA7, HOLDOUT7, UNSCALED_RUN_S, Night, replay_with_coverage
from flaggems_replay import live_coverage, night_record, processes, record_latency

from zlops.alerts.lifecycle import AlertState
from zlops.config.settings import ThresholdsConfig
from zlops.formats import flaggems_record, parse_results
from zlops.judge import coverage
from zlops.model import Thresholds, Verdict
from zlops.stats.noise import robust_relative_spread

NIGHTS = ("A",) * 7 + ("W", "W")
FIRST_W = NIGHTS.index("W")      # index of W's first night (night 8)
SIX = 7                          # night 7: six nights of history before it (nights 1-6), noise.min_nights = 6
TIME_SCALE = float(os.environ.get("ZLOPS_HOLDOUT_TIME_SCALE", "0.05"))
SLOWED = HOLDOUT7.slowed_case
LOUD = {Verdict.IMPROVED, Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE}
CONFIRMED = {Verdict.REGRESSION, Verdict.SEVERE}
THRESHOLDS = Thresholds(ThresholdsConfig().potential_pct, ThresholdsConfig().regression_pct)   # 2% and 5%
LIVE = HOLDOUT7.data
GT = DATA7 / "groundtruth"


def _processes() -> list[dict[str, str]]:
    return processes(LIVE)


def _record(night: int) -> dict[str, Any]:
    return night_record(LIVE, night)


def _latency(path: Path, case: str = SLOWED) -> float:
    return record_latency(path, case)


def _change(base: list[float], head: list[float]) -> float:
    return 100 * (statistics.median(head) / statistics.median(base) - 1)


def _live_coverage(night: int) -> tuple[int, int, int]:
    return live_coverage(LIVE, night)


# --- the record, as it came from the device (fast) -------------------------------------------------------------

def test_the_ground_truth_measured_the_change_first_and_the_ab_runs_agree() -> None:
    """Before any night (call 1, one `-m cos --mode cudagraph` process each): 16 terms +5.07%, 32 +10.71%, 48
    +14.60% on cos (64, 64); 16 (nearest +3%) picked. The nights' finished A/B runs (A and W interleaved, nights 8 and
    9): +4.81%, every W run slower than every A run."""
    by = {row["label"]: _latency(GT / "sel" / row["log"]) for row in processes(GT / "sel")}
    assert set(by) == {"A", "W16", "W32", "W48"}
    assert by["A"] == pytest.approx(1.3523e-3, rel=1e-4)
    changes = {k: round(100 * (by[k] / by["A"] - 1), 2) for k in ("W16", "W32", "W48")}
    assert changes == {"W16": 5.07, "W32": 10.71, "W48": 14.60}
    assert "change picked: W16 -> origin/k16" in (GT / "gt7_summary.txt").read_text()
    ab = [p for p in _processes() if p["kind"] == "ab" and p["log"] != "-"]
    base = [_latency(LIVE / p["log"]) for p in ab if p["side"] == "A"]
    head = [_latency(LIVE / p["log"]) for p in ab if p["side"] == "B"]
    assert (len(base), len(head)) == (4, 6) and max(base) < min(head)
    assert _change(base, head) == pytest.approx(4.81, abs=0.005)
    for f in (GT / "env.txt", LIVE / "env.txt", LIVE / "env_c1.txt"):
        assert "NVIDIA H100" in f.read_text(), f


def _kg() -> dict[str, dict[str, Any]]:
    rows = list(csv.DictReader((GT / "kg" / "processes.tsv").open(), delimiter="\t"))
    out: dict[str, dict[str, Any]] = {}
    for mode in ("kernel", "cudagraph"):
        mine = [r for r in rows if r["mode"] == mode]
        series: dict[tuple[str, str], list[float]] = {}
        for r in mine:
            for res in parse_results("flaggems-record", GT / "kg" / r["log"]):
                if res.metric in ("latency", "latency_base"):   # what coverage counts (the rest follow latency)
                    series.setdefault((res.case, res.metric), []).extend(res.samples)
        cvs = [robust_relative_spread(v) for v in series.values()]
        out[mode] = {"n": len(series), "procs": len(mine), "rc": {r["rc"] for r in mine},
                     "at5": sum(3 * c < 5 for c in cvs), "at2": sum(3 * c < 2 for c in cvs),
                     "cv": statistics.median(cvs), "wall": statistics.median(float(r["wall_s"]) for r in mine)}
    return out


def test_kernel_vs_graph_timer_on_the_same_machine() -> None:
    """Fresh whole-subset processes of A, K G K G K (the sixth did not fit the call's budget), every op run under
    both timers (exit 0, 55 series each). Counted series (latency and latency_base) whose 3 x robust CV between
    processes is below 5% / 2%: kernel 20/30 and 17/30 (median CV 0.30%), graph 30/30 and 29/30 (0.09%; two
    processes). A graph process costs 43.0 s against 30.1 s (median wall), ~1.4x."""
    kg = _kg()
    k, g = kg["kernel"], kg["cudagraph"]
    assert (k["procs"], g["procs"], k["rc"], g["rc"], k["n"], g["n"]) == (3, 2, {"0"}, {"0"}, 30, 30)
    assert (k["at5"], k["at2"], g["at5"], g["at2"]) == (20, 17, 30, 29)
    assert round(k["cv"], 2) == 0.30 and round(g["cv"], 2) == 0.09
    assert (round(k["wall"], 1), round(g["wall"], 1)) == (30.1, 43.0)


def test_the_record_holds_every_process_of_the_nights_with_the_code_it_ran() -> None:
    procs = _processes()
    shards = [p for p in procs if p["kind"] == "night"]
    ab = [p for p in procs if p["kind"] == "ab"]
    assert [p["commit"] for p in shards] == list(NIGHTS) == [p["label"] for p in shards]
    assert [p["lease"] for p in shards] == ["1"] * 8 + ["2"]       # night 9 on a fresh machine
    assert {p["night"] for p in ab} == {"8", "9"} and len(ab) == 12
    assert {p["selection"] for p in ab} == {"cos"}                  # the A/B ran only the suspect's op
    killed = [p for p in ab if p["log"] == "-"]
    assert [(p["night"], p["side"], p["status"]) for p in killed] == [("8", "A", "running"), ("9", "A", "running")]
    for p in procs:
        if p["log"] == "-":
            continue
        assert p["status"] == "ok" and p["rc"] == "0", p
        results = flaggems_record.parse((LIVE / p["log"]).read_text(), source=p["log"])
        ops = {r.case.split("/")[0] for r in results}
        assert (len(results), ops) == ((55, set(HOLDOUT7.ops)) if p["kind"] == "night" else (20, {"cos"})), p["log"]
    assert all('"mode": "cudagraph"' in (LIVE / p["log"]).read_text() for p in procs if p["log"] != "-")
    assert '"--mode", "cudagraph"' in (LIVE / "zlops.yaml").read_text()
    w = (LIVE / "upstream" / "cos_W.py").read_text()
    assert "def cos_func_small(x):" in w and w.count("    p = 1.0 - (x2 * ") == 16 and "A.numel() <= 65536" in w
    assert "zlops c1f9eb3" in (LIVE / "env.txt").read_text()


def test_the_live_nights_said_nothing_loud_and_stated_their_coverage() -> None:
    """Nights 1-7 (A): nothing loud, no alert announced, no A/B (its baseline is the commit itself); each report and
    Slack summary states the coverage. Night 7 (six nights of history): 29/30 watched at 5% (97%), 27/30 at 2% (90%).
    Nights 8 and 9 (W): the change a suspect (+6.63%, +7.67% against the median of 7 nights), nothing loud; their
    A/Bs were cut by the call's time limit (zlops exit 124), so no report was written."""
    for k in range(1, 10):
        night = _record(k)
        assert night["series"] == 55 and not night["loud"], k
        assert not LOUD & {Verdict(v) for v in night["verdict_counts"]}, k
        assert all(not e["announced"] for e in night["alert_events"]), k
        assert night["rc"] == (0 if k <= SIX else 124), k
    for k in range(1, SIX + 1):
        report = (LIVE / "reports" / f"n{k}-A.report.txt").read_text()
        slack = (LIVE / "reports" / f"n{k}-A.slack.json").read_text()
        assert "coverage:" in report and "coverage:" in slack, k
    assert "h200: coverage: 29/30 watched at 5% (97%), 27/30 at 2% (90%)" in \
        (LIVE / "reports" / "n7-A.report.txt").read_text()
    assert _live_coverage(SIX) == (30, 29, 27)
    for k in (2, 3, 4, 5, 6):
        assert _live_coverage(k)[1:] == (0, 0), k   # provisional noise (fewer than min_nights nights): too few nights
    for k, pct in ((8, 6.63), (9, 7.67)):
        (row,) = [r for r in _record(k)["suspects"] if r["case"] == SLOWED and r["metric"] == "latency"]
        assert row["verdict"] == "suspect" and round(row["change_pct"], 2) == pct


def test_the_replays_per_op_times_are_the_records() -> None:
    """HOLDOUT7.op_s re-derived: cos the median pytest session of the finished -m cos A/B runs, gelu + softmax the
    median whole-subset session of the nightly shards (nights 2-9) less it."""
    cos = statistics.median(float(p["pytest_s"]) for p in _processes() if p["kind"] == "ab" and p["log"] != "-")
    whole = statistics.median(float(p["pytest_s"]) for p in _processes() if p["kind"] == "night" and p["night"] != "1")
    assert HOLDOUT7.op_s["cos"] == pytest.approx(cos, abs=0.005)
    assert HOLDOUT7.op_s["gelu"] + HOLDOUT7.op_s["softmax"] == pytest.approx(whole - cos, abs=0.01)


# --- the replay through the real zlops nightly (slow: ~1 min) ----------------------------------------------------

@dataclass
class Replayed:
    nights: list[Night]
    alerts: list[Any]
    coverage: list[coverage.Coverage]     # per night, the pool's (one pool)
    table: str


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    _store, _up, nights, alerts, covs, table = replay_with_coverage(
        tmp_path_factory.mktemp("holdout7"), HOLDOUT7, NIGHTS, time_scale=TIME_SCALE, thresholds=THRESHOLDS)
    return Replayed(nights, alerts, covs, table)


def _changed(n: Night, case: str, metric: str) -> bool:
    return n.label == "W" and case == SLOWED and metric in HOLDOUT7.slowed_metrics


@pytest.mark.slow
def test_the_replay_decides_nights_1_to_7_as_the_live_nights_did(replayed: Replayed) -> None:
    """Fidelity: nights 1-7 replayed give the verdict counts and the coverage the live nights stored (zlops c1f9eb3);
    each night is served its own shard."""
    procs = {p["log"]: p for p in _processes()}
    for n in replayed.nights[:SIX]:
        counts: dict[str, int] = {}
        for v in n.verdicts.values():
            counts[v.value] = counts.get(v.value, 0) + 1
        assert counts == _record(n.index)["verdict_counts"], (n.index, replayed.table)
        nightly = [s for s in n.served if s["where"] == "night"]
        assert len(nightly) == 1 and procs[nightly[0]["log"]]["night"] == str(n.index)
        if n.index > 1:
            c = replayed.coverage[n.index - 1]
            assert (c.total, c.high.watched, c.low.watched) == _live_coverage(n.index), (n.index, replayed.table)


@pytest.mark.slow
def test_coverage_after_six_nights_under_the_graph_timer(replayed: Replayed) -> None:
    """Night 7 (six nights of history): 29/30 counted series watched at 5% (97%, the done-when asks 80%), 27/30 at 2%
    (90%); none through the A/B. Nights 2-6 read 0%: their noise model is provisional (too few nights)."""
    c = replayed.coverage[SIX - 1]
    assert (c.total, c.high.watched, c.low.watched, c.high.through_ab) == (30, 29, 27, 0), replayed.table
    assert c.share_high is not None and c.share_high >= 0.80
    for k in range(2, SIX):
        assert replayed.coverage[k - 1].high.why == {"too few nights": 30} or \
            replayed.coverage[k - 1].high.watched == 0, (k, replayed.table)


@pytest.mark.slow
def test_no_loud_verdict_and_no_confirmed_alert_on_unchanged_series(replayed: Replayed) -> None:
    """Over all nine nights: 0 improved/potential/regression/severe verdicts and 0 confirmed (or announced) alerts on
    every series but cos (64x64)'s latency and the metrics that follow it on W's nights."""
    loud = [(n.index, c, m, v.value) for n in replayed.nights for (c, m), v in n.verdicts.items()
            if v in LOUD and not _changed(n, c, m)]
    announced = [(n.index, c, m, to) for n in replayed.nights for c, m, to in n.announced if not _changed(n, c, m)]
    confirmed = [(a.case, a.metric) for a in replayed.alerts if a.state is AlertState.CONFIRMED
                 and not (a.case == SLOWED and a.metric in HOLDOUT7.slowed_metrics)]
    assert not (loud or announced or confirmed), f"{loud}\n{announced}\n{confirmed}\n{replayed.table}"
    for n in replayed.nights[:SIX]:
        assert not [k for k, v in n.verdicts.items() if v in LOUD] and not n.announced, (n.index, replayed.table)


@pytest.mark.slow
def test_the_change_is_confirmed_by_its_second_night_by_an_ab_that_ran(replayed: Replayed) -> None:
    """cos (64x64) latency is a regression on W's first or second night, decided by an A/B that ran (5 + 5 of the
    recorded -m cos runs: the change the processes show, CI beyond the floor) within the production budget scaled;
    one alert for the case, confirmed."""
    hits = []
    for n in replayed.nights[FIRST_W:FIRST_W + 2]:
        row = n.comparisons[(SLOWED, "latency")]
        by_ab = row.figures is not None and row.figures.reference_label.startswith("A/B")
        if row.verdict in CONFIRMED and by_ab and "confirmed by A/B" in row.judgement.note and n.ab.get("runs", 0):
            hits.append(n)
    assert hits, replayed.table
    n = hits[0]
    fig = n.comparisons[(SLOWED, "latency")].figures
    assert 4.0 < fig.change_pct < 6.0 and fig.ci_pct[0] > THRESHOLDS.potential_pct, replayed.table
    assert float(n.ab["seconds"]) <= float(n.ab["budget_s"]) + UNSCALED_RUN_S, replayed.table
    mine = [a for a in replayed.alerts if a.case == SLOWED]
    assert [(a.metric, a.state) for a in mine] == [("latency", AlertState.CONFIRMED)], replayed.table
