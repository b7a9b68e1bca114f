"""How often the A/B (zlops.stats.confirm_ab, production defaults) confirms a change on unchanged code whose
processes land on two levels, and how many pairs a real +2.87% needs (issue 22).

    python benchmarks/ab_level_shift_false_rate.py [--n 600]

Each trial draws base and head runs of ONE code from a two-level mixture (levels lo/hi, share p on lo, 0.3%
noise within a level): any confirmation is false. Then a +2.87% shift, quiet (0.08%) and noisy (0.5%).
"""

from __future__ import annotations

import argparse

import numpy as np

from zlops.stats import confirm_ab


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=600, help="trials per row")
    args = ap.parse_args()
    rng = np.random.default_rng(7)

    def rate(gen, pairs: int, n: int) -> float:  # type: ignore[no-untyped-def]
        hits = 0
        for i in range(n):
            a, b = gen(pairs)
            hits += confirm_ab(a, b, n_resamples=400, seed=i).confirmed
        return hits / n

    print("| series | pairs | confirmed |\n|---|---|---|")
    for lo, hi, p in ((1.0, 1.35, 0.5), (1.0, 1.08, 0.5), (1.0, 1.03, 0.5), (1.0, 1.35, 0.8), (1.0, 1.03, 0.8)):
        def two(k: int, lo: float = lo, hi: float = hi, p: float = p) -> np.ndarray:
            return np.where(rng.random(k) < p, lo, hi) * rng.normal(1, 0.003, k)
        for pairs in (5, 6, 7, 8):
            print(f"| unchanged, levels {lo}/{hi} ({p:.0%} low) | {pairs} | "
                  f"{rate(lambda k: (two(k), two(k)), pairs, args.n):.2%} |", flush=True)
    for sd in (0.0008, 0.005):
        for pairs in (5, 6, 8):
            got = rate(lambda k, sd=sd: (rng.normal(1, sd, k), rng.normal(1.0287, sd, k)), pairs, args.n // 3)
            print(f"| +2.87%, {sd:.2%} noise | {pairs} | {got:.1%} |", flush=True)


if __name__ == "__main__":
    main()
