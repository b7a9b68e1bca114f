"""Ground truth and cost figures of the hold-out recording (tests/data/flaggems_h200/holdout_2026-12-01/),
as docs/evidence/h200_holdout/README.md quotes them.

    python benchmarks/h200/flaggems_holdout_stats.py [DATA_DIR]
"""

from __future__ import annotations

import json
import statistics as st
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "flaggems_h200" / "holdout_2026-12-01"
SLOWED = ("mean", "[1024, 1024, 1024]")


def processes(data: Path) -> list[dict[str, str]]:
    lines = [line.split("\t") for line in (data / "processes.tsv").read_text().splitlines() if line.strip()]
    return [dict(zip(lines[0], row, strict=True)) for row in lines[1:]]


def latencies(log: Path) -> dict[tuple[str, str], float]:
    out = {}
    for line in log.read_text().splitlines():
        if line.startswith("[INFO] {"):
            rec = json.loads(line[len("[INFO] "):])
            for r in rec["result"]:
                out[(rec["op_name"], json.dumps(r["shape_detail"][0]))] = r["latency"]
    return out


def test_spans(timing: Path) -> dict[str, float]:
    """seconds each test took, from the plugin's start/finish stamps"""
    start, spans = {}, {}
    for line in timing.read_text().splitlines():
        t, ev, what = line.split("\t")
        if ev == "start":
            start[what] = float(t)
        elif ev == "finish":
            spans[what.split("::")[-1]] = float(t) - start[what]
    return spans


def fit_cost_model(procs: list[dict[str, str]]) -> None:
    """least squares: wall = fixed + sum of per-op costs, over every warm pytest process (not cold, not probe)"""
    import numpy as np

    ops = ("mean", "amax", "add")
    rows = [p for p in procs if p["kind"] in ("full", "sel", "one")]
    x = np.array([[1.0] + [float(op in p["selection"].split(" or ")) for op in ops] for p in rows])
    y = np.array([float(p["wall_s"]) for p in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    terms = " + ".join(f"{op} {c:.2f} s" for op, c in zip(ops, coef[1:], strict=True))
    rms = float(np.sqrt((resid**2).mean()))
    print(f"cost model fit over {len(rows)} processes: fixed {coef[0]:.2f} s + {terms}; residual max "
          f"{100 * max(abs(resid / y)):.0f}% of a process, rms {rms:.2f} s")


def main(data: Path = DATA) -> None:
    procs = processes(data)
    full = [p for p in procs if p["kind"] == "full"]
    gt = full[:12]  # the first 6 + 6 interleaved pairs (seq 3-14)
    print(f"{len(procs)} processes: " + ", ".join(
        f"{k} {sum(p['kind'] == k for p in procs)}" for k in ("cold", "full", "sel", "one", "probe")))
    for name, rows in (("ground truth (first 6 + 6 full pairs)", gt), ("all full processes", full)):
        a = [latencies(data / p["log"])[(SLOWED[0], json.dumps(json.loads(SLOWED[1])))] for p in rows
             if p["label"] == "A"]
        s = [latencies(data / p["log"])[(SLOWED[0], json.dumps(json.loads(SLOWED[1])))] for p in rows
             if p["label"] == "S"]
        print(f"{name}: mean {SLOWED[1]} latency ms  A n={len(a)} median {st.median(a):.4f} "
              f"range {min(a):.4f}-{max(a):.4f}  S n={len(s)} median {st.median(s):.4f} range {min(s):.4f}-"
              f"{max(s):.4f}  change {100 * (st.median(s) / st.median(a) - 1):+.2f}% "
              f"(worst pair of extremes {100 * (min(s) / max(a) - 1):+.2f}% .. {100 * (max(s) / min(a) - 1):+.2f}%)")
    # every other series: the largest A-vs-S median change (should be ~0)
    a_all = [latencies(data / p["log"]) for p in full if p["label"] == "A"]
    s_all = [latencies(data / p["log"]) for p in full if p["label"] == "S"]
    moves = []
    for key in a_all[0]:
        ma, ms = st.median(x[key] for x in a_all), st.median(x[key] for x in s_all)
        spread = (max(x[key] for x in a_all) - min(x[key] for x in a_all)) / ma
        moves.append((100 * (ms / ma - 1), 100 * spread, key))
    moves.sort(key=lambda m: -abs(m[0]))
    print("largest A->S median changes (all full processes), % and A's between-process spread %:")
    for change, spread, key in moves[:6]:
        print(f"  {key[0]:5s} {key[1]:22s} {change:+6.2f}%  spread {spread:5.2f}%")
    sel = {lab: [latencies(data / p["log"])[(SLOWED[0], json.dumps(json.loads(SLOWED[1])))] for p in procs
                 if p["kind"] == "sel" and p["label"] == lab] for lab in ("A", "S")}
    print(f"-m mean processes: A {min(sel['A']):.4f}-{max(sel['A']):.4f} ms (n={len(sel['A'])}), S "
          f"{min(sel['S']):.4f}-{max(sel['S']):.4f} ms (n={len(sel['S'])}), change of medians "
          f"{100 * (st.median(sel['S']) / st.median(sel['A']) - 1):+.2f}%")
    fit_cost_model(procs)
    for kind in ("cold", "full", "sel", "one", "probe"):
        rows = [p for p in procs if p["kind"] == kind]
        for sel in sorted({p["selection"] for p in rows}):
            w = [float(p["wall_s"]) for p in rows if p["selection"] == sel]
            u = [float(p["startup_s"]) for p in rows if p["selection"] == sel]
            print(f"{kind:5s} [{sel or 'import torch, flag_gems'}] n={len(w)} wall {min(w):.1f}-{max(w):.1f} s "
                  f"(median {st.median(w):.1f})  start-up {min(u):.1f}-{max(u):.1f} s (median {st.median(u):.1f})")
    per_test: dict[str, list[float]] = {}
    tail = []
    for p in procs:
        if p["kind"] in ("full", "sel", "one"):
            spans = test_spans(data / p["timing"])
            for test, sec in spans.items():
                per_test.setdefault(test, []).append(sec)
            stamps = [float(line.split("\t")[0]) for line in (data / p["timing"]).read_text().splitlines()]
            fins = [float(line.split("\t")[0]) for line in (data / p["timing"]).read_text().splitlines()
                    if "\tfinish\t" in line]
            tail.append(stamps[-1] - fins[-1])
    for test, secs in sorted(per_test.items()):
        print(f"{test:10s} n={len(secs)} {min(secs):.2f}-{max(secs):.2f} s (median {st.median(secs):.2f}) per process")
    print(f"after the last test until exit: {min(tail):.2f}-{max(tail):.2f} s (median {st.median(tail):.2f})")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA)
