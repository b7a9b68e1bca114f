"""zlops' hand-written E-divisive (zlops.stats.changepoint) against Apache Otava's, side by side.

    mkdir -p /tmp/otava && pip download --no-deps apache-otava==0.8.0 -d /tmp/otava
    pip install --no-deps --target /tmp/otava/target /tmp/otava/apache_otava-0.8.0-py3-none-any.whl
    python benchmarks/changepoint_lib.py --otava-path /tmp/otava/target

Otava is loaded from a folder of its own (``--no-deps``): its wheel pins ``numpy==2.2.0.*`` and
``scipy<1.17`` and pulls google-cloud-bigquery, pg8000 and others, so it cannot join zlops' environment
as is; ``otava.analysis`` itself needs only numpy and scipy. MongoDB's signal-processing-algorithms
2.1.6 needs ``numpy<2`` and Python 3.11 exactly and builds a C extension, so it is not tried.

Correctness: the scenarios of ``tests/stats/test_stats_changepoint.py`` (same seeds), with Otava's
``compute_change_points`` as is and with the ``min_size`` rule zlops' API promises applied after it
(a change point leaving a segment shorter than ``min_size`` is dropped, then Otava's merge re-runs).
Speed: one call per history length, the nightly's use (a flagged series, <= 60 nights) and a year.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "stats"))

ChangePoints = Callable[..., list[int]]


def _noisy(levels: np.ndarray, sigma_pct: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return (levels * (1 + sigma_pct / 100 * rng.standard_normal(levels.size))).tolist()


def otava_change_points(min_size_rule: bool) -> ChangePoints:
    from otava.analysis import TTestSignificanceTester, compute_change_points, merge

    def run(series: Sequence[float], *, min_size: int = 3, max_pvalue: float = 0.001,
            min_magnitude_pct: float = 0.0, window_len: int = 50) -> list[int]:
        values = [float(v) for v in series]  # a list: otava 0.8.0 mis-offsets windows of an ndarray
        cps, _ = compute_change_points(values, window_len=window_len, max_pvalue=max_pvalue,
                                       min_magnitude=min_magnitude_pct / 100.0)
        if min_size_rule:
            kept = []
            for cp in cps:
                if cp.index >= min_size and len(values) - cp.index >= min_size and \
                        (not kept or cp.index - kept[-1].index >= min_size):
                    kept.append(cp)
            if len(kept) != len(cps):
                tester = TTestSignificanceTester(max_pvalue)
                intervals = tester.get_intervals(kept)
                kept = [tester.change_point(c.to_candidate(), values, intervals) for c in kept]
                cps = merge(kept, values, max_pvalue, min_magnitude_pct / 100.0)
        return [int(cp.index) for cp in cps]

    return run


def scenarios() -> list[tuple[str, list[float], dict[str, object], list[int] | None]]:
    """(name, series, kwargs, expected change points; None: any)."""
    from conftest import cv_pct, load_real_noise

    out: list[tuple[str, list[float], dict[str, object], list[int] | None]] = [
        ("single step at 30", _noisy(np.r_[np.full(30, 1.0), np.full(20, 1.05)], 0.5, seed=1), {}, [30]),
        ("steps at 120 and 150 (windows)", _noisy(np.r_[np.full(120, 1.0), np.full(30, 1.03), np.full(50, 0.98)],
                                                  0.5, seed=2), {}, [120, 150]),
    ]
    out += [(f"pure noise seed {s}", _noisy(np.ones(60), 1.0, seed=s), {}, []) for s in range(5)]
    spike = np.ones(40)
    spike[25] = 1.3
    out.append(("a single spike (min_size 3)", _noisy(spike, 0.3, seed=3), {"min_size": 3}, []))
    small = _noisy(np.r_[np.full(30, 1.0), np.full(30, 1.01)], 0.1, seed=4)
    out.append(("1% step", small, {}, [30]))
    out.append(("1% step, min magnitude 2%", small, {"min_magnitude_pct": 2.0}, []))
    out.append(("step for first_bad_night", _noisy(np.r_[np.full(20, 1.0), np.full(15, 1.06)], 0.3, seed=5), {}, [20]))
    quiet = {k: v for k, v in load_real_noise().items() if cv_pct(v) < 1.0}
    out += [(f"real quiet A/A {k}", v, {}, []) for k, v in quiet.items()]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--otava-path", type=Path, required=True, help="a folder holding the otava package")
    ap.add_argument("--repeat", type=int, default=20)
    ns = ap.parse_args(argv)
    sys.path.insert(0, str(ns.otava_path))
    from zlops.stats import change_points

    impls: dict[str, ChangePoints] = {"zlops": change_points, "otava": otava_change_points(False),
                                      "otava+min_size": otava_change_points(True)}
    cases = scenarios()
    wrong = {name: 0 for name in impls}
    print("| scenario | expected | " + " | ".join(impls) + " |")
    print("|---|---|" + "---|" * len(impls))
    for title, series, kwargs, expected in cases:
        got = {name: fn(series, **kwargs) for name, fn in impls.items()}
        for name, cps in got.items():
            wrong[name] += expected is not None and cps != expected
        if any(cps != expected for cps in got.values()) or not title.startswith("real quiet"):
            print(f"| {title} | {expected} | " + " | ".join(str(got[n]) for n in impls) + " |")
    print(f"\nwrong answers of {len(cases)} scenarios: " + ", ".join(f"{n} {w}" for n, w in wrong.items()))
    print("\n| nights | " + " | ".join(f"{n} ms/call" for n in impls) + " |")
    print("|---:|" + "---:|" * len(impls))
    for nights in (30, 60, 365):
        levels = np.r_[np.ones(nights // 2), np.full(nights - nights // 2, 1.05)]
        series = _noisy(levels, 1.0, seed=nights)
        row = []
        for fn in impls.values():
            fn(series)
            t0 = time.perf_counter()
            for _ in range(ns.repeat):
                fn(series)
            row.append((time.perf_counter() - t0) / ns.repeat * 1000)
        print(f"| {nights} | " + " | ".join(f"{v:.1f}" for v in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
