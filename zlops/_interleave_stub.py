"""TEMPORARY stand-in for the lead's ``zlops.interleave`` (run_pairs, Pairs) and ``zlops.errors.HostBusy``
until they land on main; :mod:`zlops.paired` imports the real ones when they exist. Delete on merge."""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from zlops.errors import ZlopsError

Key = tuple[str, str]


class HostBusy(ZlopsError):
    """A run the contention gate made invalid (stand-in for zlops.errors.HostBusy)."""


@dataclass
class Pairs:
    samples: dict[Key, tuple[list[float], list[float]]]
    runs: int
    seconds: float
    est_run_s: float
    stopped: str
    discarded: list[str] = field(default_factory=list)


def run_pairs(*, run_one: Callable[[str, int], tuple[Mapping[Key, float], float]],
              sides: Sequence[str] = ("A", "B"), seed: int, min_pairs: int, max_pairs: int, budget_s: float,
              est_run_s: float, decided: Callable[[dict[Key, tuple[list[float], list[float]]]], bool],
              quiet: Callable[[], Any] | None = None) -> Pairs:
    rng = random.Random(seed)
    samples: dict[Key, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    runs, spent, kept, attempt, discarded = 0, 0.0, 0, 0, []
    run_s = est_run_s
    stopped = f"max pairs ({max_pairs})"
    while kept < max_pairs:
        if kept >= min_pairs and decided(dict(samples)):
            stopped = "decided"
            break
        if spent + 2 * run_s > budget_s:
            stopped = f"budget ({budget_s:.0f} s) spent"
            break
        order = list(sides)
        rng.shuffle(order)
        got: dict[str, Mapping[Key, float]] = {}
        bad = None
        for k, side in enumerate(order):
            t0 = time.monotonic()
            try:
                medians, took = run_one(side, 2 * attempt + k)
            except HostBusy as exc:
                spent += time.monotonic() - t0
                runs += 1
                bad = str(exc)
                break
            spent += took
            runs += 1
            got[side] = medians
        attempt += 1
        run_s = max(est_run_s, spent / max(runs, 1))
        if bad is not None:
            discarded.append(f"pair {attempt}: {bad}")
            if quiet is not None:
                quiet()
            continue
        kept += 1
        for key in set(got[sides[0]]) & set(got[sides[1]]):
            samples[key][0].append(got[sides[0]][key])
            samples[key][1].append(got[sides[1]][key])
    return Pairs(dict(samples), runs, spent, run_s, stopped, discarded)
