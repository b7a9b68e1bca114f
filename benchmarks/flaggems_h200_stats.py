"""Between-process statistics of the FlagGems H200 recording (tests/data/flaggems_h200/), for the noise model.

Each recorded process is one fresh ``pytest benchmark/`` run and gives one value per series (FlagGems'
``do_bench`` median over ~100 ms of launches), so the spread *between* processes is what a night-to-night
judge faces. Per series (op, shape, metric) and code version this prints:

- n processes, median, min..max and max/min, robust CV between processes (1.4826 * MAD / median, in %);
- levels: the values sorted, split at the widest gap when that gap is >= ``--gap`` (default 1.25x) and
  each side holds >= ``--min-share`` of the processes (default 0.2): the two levels' medians, their ratio
  and shares ("bimodal"); otherwise "one level";
- for ``abs`` under commit C: the C/A ratio of medians and whether C's range clears A's (2x measurable).

Processes whose code is the same for a series are pooled: A and B (README only) for every op, and C too for
ops other than abs. The processes under ``inrun/`` measured each case of abs and sum 3 times in one process
(pytest ``--keep-duplicates``): for them it prints each process's samples and their max/min (the in-run spread).

    python benchmarks/flaggems_h200_stats.py [--data tests/data/flaggems_h200] [--metric latency]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zlops.formats import flaggems_record  # noqa: E402


@dataclass(frozen=True)
class Levels:
    low: float
    high: float
    ratio: float
    low_share: float


def robust_cv_pct(values: list[float]) -> float:
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return 100.0 * 1.4826 * mad / med if med else float("nan")


def split_levels(values: list[float], *, gap: float, min_share: float) -> Levels | None:
    """Two levels at the widest multiplicative gap between sorted values, if wide and both sides populated."""
    xs = sorted(values)
    n = len(xs)
    if n < 4:
        return None
    best_i, best_gap = -1, 1.0
    for i in range(1, n):
        g = xs[i] / xs[i - 1] if xs[i - 1] > 0 else float("inf")
        if g > best_gap:
            best_i, best_gap = i, g
    if best_gap < gap or min(best_i, n - best_i) < max(1, round(min_share * n)):
        return None
    low, high = statistics.median(xs[:best_i]), statistics.median(xs[best_i:])
    return Levels(low, high, high / low, best_i / n)


def load(data: Path) -> list[dict[str, str]]:
    lines = [line.split("\t") for line in (data / "processes.tsv").read_text().splitlines() if line.strip()]
    return [dict(zip(lines[0], row, strict=True)) for row in lines[1:]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT / "tests" / "data" / "flaggems_h200")
    ap.add_argument("--metric", default="latency", help="latency (FlagGems), latency_base (torch), speedup, tflops")
    ap.add_argument("--gap", type=float, default=1.25)
    ap.add_argument("--min-share", type=float, default=0.2)
    ap.add_argument("--values", action="store_true", help="also print each series' process values, sorted")
    args = ap.parse_args(argv)
    procs = load(args.data)
    # (case, group) -> one value per process; group "same" pools the processes with this case's code unchanged
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    inrun: dict[str, list[float]] = defaultdict(list)
    for p in procs:
        for r in flaggems_record.parse((args.data / p["log"]).read_text(), source=p["log"]):
            if r.metric != args.metric:
                continue
            changed = r.case.startswith("abs/") and p["commit"] == "C"
            values[(r.case, "C" if changed else "same")].append(statistics.median(r.samples))
    print(f"# {args.metric}: between-process statistics of {len(procs)} processes in {args.data}")
    print(f"{'series':34s} {'code':4s} {'n':>3s} {'median':>10s} {'min':>10s} {'max':>10s} {'max/min':>7s} "
          f"{'rCV%':>6s}  levels")
    cases = sorted({c for c, _ in values})
    for case in cases:
        for group in ("same", "C"):
            xs = values.get((case, group))
            if not xs:
                continue
            lv = split_levels(xs, gap=args.gap, min_share=args.min_share)
            desc = "one level" if lv is None else (
                f"bimodal {lv.low:.4g}/{lv.high:.4g} ms ({lv.ratio:.2f}x), "
                f"{lv.low_share:.0%} low / {1 - lv.low_share:.0%} high")
            print(f"{case:34s} {group:4s} {len(xs):3d} {statistics.median(xs):10.5g} {min(xs):10.5g} "
                  f"{max(xs):10.5g} {max(xs) / min(xs):7.3f} {robust_cv_pct(xs):6.2f}  {desc}")
            if args.values:
                print(" " * 40 + " ".join(f"{x:.4g}" for x in sorted(xs)))
    print("\n# abs under C against the same shape's unchanged processes")
    for case in cases:
        a, c = values.get((case, "same")), values.get((case, "C"))
        if a and c:
            ratio = statistics.median(c) / statistics.median(a)
            clear = min(c) > max(a)
            print(f"{case:34s} C/A median ratio {ratio:5.2f}  C's range {'clears' if clear else 'overlaps'} A's "
                  f"(A {min(a):.4g}..{max(a):.4g}, C {min(c):.4g}..{max(c):.4g})")
    if (args.data / "inrun" / "processes.tsv").exists():
        print("\n# in-run: one process measuring each case several times (samples in order; max/min)")
        for p in load(args.data / "inrun"):
            for r in flaggems_record.parse((args.data / "inrun" / p["log"]).read_text(), source=p["log"]):
                if r.metric == args.metric:
                    inrun[r.case].append(max(r.samples) / min(r.samples))
                    print(f"{p['log']:20s} {r.case:34s} " + " ".join(f"{x:.4g}" for x in r.samples)
                          + f"  {max(r.samples) / min(r.samples):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
