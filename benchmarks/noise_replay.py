"""Replay real H200 A/A nights through the plain 2% rule and the zlops noise-aware judge, side by side.

Run:  python benchmarks/noise_replay.py [--permutations 100] [--seed 0] [--data FILE]

Data: ``tests/data/noise/h200_aa_2026-11-29.jsonl`` (a copy of ``../shared/noise/``): 16 fresh
processes ("nights") of unchanged code on one idle H200, 11 kernels x 2 timers (do_bench_ms,
graph_ms) = 22 series, ONE value per night per series (no in-run samples).

What is real and what is simulated:

- **A/A (false alarms).** Each series is walked night by night as a nightly would: night t is
  judged with nights 0..t-1 as its history (all accepted; a suspect last night is held out until
  resolved, :func:`judge_tonight`). The real order is replayed, plus
  ``--permutations`` random reorderings of each series' 16 nights (the nights are exchangeable
  under A/A; this buys resolution at 1 per 1,000, at the cost of breaking any persistence of
  modes between consecutive processes, which the real-order row keeps). Nights 1..15 are judged by
  every method, so the case-night counts are the same for all of them. A run of nights the two-night
  judge left unresolved suspects stays out of the history as the nightly leaves it out
  (:func:`without_pending`); the A/B method reads the same screening (an approximation: there an A/B
  would have resolved them), and no history restarts at a confirmed change (A/A nights have none).
- **Injected slowdowns (detection).** For each series and order, nights t0.. are multiplied by
  (1 + s), s in {2, 3, 5, 10}%, t0 in {6, 9, 12, 14} (0-based: at least 6 nights of history). A
  slowdown counts as detected when the method raises an alarm on night t0 or t0+1 (the same
  two-night window for every method, since the consecutive rule needs two nights).
- **No in-run samples.** Tonight's "samples" are the one night value, so the in-run noise is
  unknown and the noise model rests on the between-night spread alone; before ``min_nights`` the
  zlops threshold is the floor (provisional, cannot be confirmed by consecutive nights).
- **A/B confirmation (simulated).** The real A/A values of a series are exactly what an A/B on the
  same device draws from: fresh processes one after another. A simulated A/B takes a random split
  of the series' 16 real values into 8 "base" and 8 "head" values and multiplies head by (1 + s)
  where s is the slowdown injected at that night (0 on A/A nights); :func:`confirm_ab` judges it.
  Caveat: base and head share the pool of the nights being replayed.

Methods, each run on the same case-nights:

- ``plain 2%``: tonight > 2% slower than last night.
- ``plain 2%, 2 nights``: ablation, the plain rule plus two consecutive flagged nights.
- ``zlops screen``: the noise-aware nightly screening alone (``suspect``; nobody is alerted).
- ``zlops + 2 nights``: suspect confirmed by two consecutive suspect nights (no A/B possible).
- ``zlops + A/B``: suspect confirmed by the simulated same-device A/B.
- ``zlops + A/B + candidates``: today's nightly: the suspects and the A/B candidates (a move beyond the floor
  that the nights cannot judge: unmeasurable, or inside a threshold above the floor) put to the same simulated
  A/B through the judge's own ``zlops.judge.judges.confirm_suspect`` (a suspect against its threshold, a
  candidate against the floor).
  A candidate is confirmed only where 3 x the spread of its A/B's own runs is within the larger of the 5% target and
  the change the A/B measured (:func:`zlops.judge.judges.ab_spread_line`).
- ``zlops + A/B + candidates, spread vs 5% only``: the same with the previous line, the 5% target alone (patched
  in for the comparison): a large change of a noisy series was not confirmed.

Series are split by their A/A noise, the coefficient of variation of the 16 nights (the README's
figure, independent of the zlops estimator): below 1% and at least 1%. Prints markdown tables.
Deterministic for a given ``--seed``.
"""

from __future__ import annotations

import argparse
import json
import time
from unittest import mock
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zlops.stats import Confirmation, NightResult, Policy, State, confirm_ab, decide, judge_tonight, noise_model
from zlops.judge import judges
from zlops.judge.judges import STATE_VERDICTS, ab_candidate, confirm_suspect, night_figures
from zlops.model import Judgement, Verdict
from zlops.stats.decide import unresolved_suspects, without_pending

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "noise" / "h200_aa_2026-11-29.jsonl"
TIMERS = ("do_bench_ms", "graph_ms")
SIZES = (2.0, 3.0, 5.0, 10.0)
INJECT_AT = (6, 9, 12, 14)
PLAIN_PCT = 2.0
#: the previous candidate rule, kept side by side: a candidate's A/B confirms only where 3 x its runs' spread is
#: within the 5% target (today's: within the larger of the target and the change, zlops.judge.judges.ab_spread_line)
PRIOR = "candidates, spread vs 5% only"
METHODS = ("plain 2%", "plain 2%, 2 nights", "zlops screen", "zlops + 2 nights", "zlops + A/B",
           f"zlops + A/B + {PRIOR}", "zlops + A/B + candidates")
ALARM = (State.REGRESSION, State.SEVERE)
#: an improvement is judged as strictly as a regression: announced improvements on A/A nights are false too
FALSE_IMPROVEMENT = ("plain 2% faster", "zlops improved, 2 nights", "zlops improved, A/B",
                     f"zlops improved, A/B + {PRIOR}", "zlops improved, A/B + candidates")


def load_series(path: Path) -> dict[str, list[float]]:
    """``{"case/timer": [night 1, night 2, ...]}`` from the A/A jsonl (nulls dropped)."""
    nights: dict[str, dict[int, float]] = defaultdict(dict)
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                for timer in TIMERS:
                    if rec.get(timer) is not None:
                        nights[f"{rec['case']}/{timer}"][int(rec["night"])] = float(rec[timer])
    return {key: [v[n] for n in sorted(v)] for key, v in sorted(nights.items())}


def cv_pct(values: Sequence[float]) -> float:
    arr = np.asarray(values, dtype=float)
    return float(arr.std(ddof=1) / arr.mean() * 100.0)


@dataclass
class Tally:
    alarms: dict[str, int] = field(default_factory=lambda: dict.fromkeys(METHODS + FALSE_IMPROVEMENT, 0))
    nights: int = 0
    ab_runs: int = 0
    ab_runs_candidates: int = 0   # A/Bs of candidates (no suspect would have asked them)
    ab_runs_provisional: int = 0
    inject_unmeasurable: int = 0
    unmeasurable: int = 0
    provisional: int = 0
    detected: dict[tuple[str, float], int] = field(default_factory=lambda: defaultdict(int))
    trials: dict[float, int] = field(default_factory=lambda: defaultdict(int))
    detected_measurable: dict[tuple[str, float], int] = field(default_factory=lambda: defaultdict(int))
    trials_measurable: dict[float, int] = field(default_factory=lambda: defaultdict(int))


def _calibrated(night: NightResult) -> bool:
    return night.noise is not None and night.noise.enough_history


class Replay:
    """One series in one night order: judges a night by every method (the A/B drawn from the series' pool)."""

    def __init__(self, pool: Sequence[float], policy: Policy, seed: Sequence[int]) -> None:
        self.pool = np.array(pool, dtype=float)
        self.policy = policy
        self.seed = list(seed)
        self.candidate_runs = 0   # A/Bs asked for a candidate that no suspect would have asked

    def ab_runs(self, slowdown: float, salt: Sequence[int]) -> tuple[list[float], list[float]]:
        """The A/B's runs: a random split of the series' real values, the head side slowed by ``slowdown``."""
        rng = np.random.default_rng([*self.seed, *salt])
        n = self.policy.ab_pairs
        split = rng.permutation(self.pool)
        return split[:n].tolist(), (split[n:2 * n] * (1.0 + slowdown / 100.0)).tolist()

    def ab(self, slowdown: float, salt: Sequence[int]) -> Confirmation:
        base, head = self.ab_runs(slowdown, salt)
        return confirm_ab(base, head, threshold_pct=self.policy.potential_pct,
                          severe_pct=self.policy.regression_pct, alpha=self.policy.alpha,
                          use_ks=self.policy.use_ks, confidence=self.policy.confidence,
                          n_resamples=self.policy.n_resamples, seed=[*self.seed, *salt, 1])

    def night(self, x: np.ndarray, t: int, prev_plain: bool, slowdown: float, salt: Sequence[int],
              states: Sequence[str | None]) -> tuple[dict[str, bool], NightResult, bool, bool, str]:
        """Alarms of every method on night t of series x (history x[:t], less the unresolved suspects among
        ``states``, the decided two-night states of nights 0..t-1, as the nightly leaves them out), plus
        what the next night needs and tonight's decided two-night state."""
        plain = bool((x[t] / x[t - 1] - 1.0) * 100.0 > PLAIN_PCT)
        history = without_pending(x[:t].tolist(), unresolved_suspects(states))
        night, previous = judge_tonight(history, [float(x[t])], lower_is_better=True, policy=self.policy)
        alarms = {"plain 2%": plain, "plain 2%, 2 nights": plain and prev_plain,
                  "zlops screen": night.state is State.SUSPECT}
        alarms["zlops + 2 nights"] = decide(night, previous=previous, policy=self.policy).state in ALARM
        ab_run = night.state in (State.SUSPECT, State.SUSPECT_IMPROVED)
        alarms["zlops + A/B"] = alarms["zlops improved, A/B"] = False
        if ab_run:
            conf = self.ab(slowdown, salt)
            decided = decide(night, ab=conf, policy=self.policy).state
            alarms["zlops + A/B"] = decided in ALARM
            alarms["zlops improved, A/B"] = decided is State.IMPROVED
        # today's nightly: the suspects and the A/B candidates (a move beyond the floor the nights cannot judge)
        # put to the same A/B, through the judge's own confirm_suspect (zlops.judge.judges)
        asked = Judgement(STATE_VERDICTS[night.state.value], night.change_pct, night.worse_pct, night.threshold_pct,
                          night.reason, figures=night_figures(night, n_samples=1, lower_is_better=True))
        for name in ("candidates", PRIOR):
            alarms[f"zlops + A/B + {name}"] = alarms[f"zlops improved, A/B + {name}"] = False
        if ab_run or ab_candidate(asked, self.policy.potential_pct, self.policy.measurable_target_pct):
            self.candidate_runs += not ab_run
            base, head = self.ab_runs(slowdown, salt)
            for name, line in (("candidates", judges.ab_spread_line), (PRIOR, lambda target, _worse: target)):
                with mock.patch.object(judges, "ab_spread_line", line):
                    got = confirm_suspect(asked, base, head, lower_is_better=True, policy=self.policy).verdict
                alarms[f"zlops + A/B + {name}"] = got in (Verdict.REGRESSION, Verdict.SEVERE)
                alarms[f"zlops improved, A/B + {name}"] = got is Verdict.IMPROVED
        alarms["plain 2% faster"] = bool((x[t] / x[t - 1] - 1.0) * 100.0 < -PLAIN_PCT)
        decided_2n = decide(night, previous=previous, policy=self.policy).state
        alarms["zlops improved, 2 nights"] = decided_2n is State.IMPROVED
        return alarms, night, plain, ab_run, decided_2n.value


def replay(series: dict[str, list[float]], *, policy: Policy, permutations: int, seed: int,
           sizes: Sequence[float] = SIZES, inject_at: Sequence[int] = INJECT_AT) -> dict[str, dict[str, Tally]]:
    """Tallies per noise group ("quiet" < 1% CV, "noisy") and per order kind ("real", "all")."""
    out: dict[str, dict[str, Tally]] = {g: {"real": Tally(), "all": Tally()} for g in ("quiet", "noisy")}
    for s_idx, (_key, values) in enumerate(series.items()):
        group = "quiet" if cv_pct(values) < 1.0 else "noisy"
        base = np.array(values, dtype=float)
        orders = [np.arange(base.size)] + [np.random.default_rng([seed, s_idx, p]).permutation(base.size)
                                           for p in range(1, permutations + 1)]
        for o_idx, order in enumerate(orders):
            x = base[order]
            rp = Replay(values, policy, [seed, s_idx, o_idx])
            tallies = [out[group]["all"]] + ([out[group]["real"]] if o_idx == 0 else [])
            plains = [False] * x.size
            states: list[str | None] = [None] * x.size
            for t in range(1, x.size):
                asked = rp.candidate_runs
                alarms, night, plains[t], ab_run, states[t] = rp.night(x, t, plains[t - 1], 0.0, [t], states[:t])
                for tal in tallies:
                    tal.nights += 1
                    tal.ab_runs += ab_run
                    tal.ab_runs_candidates += rp.candidate_runs - asked
                    tal.ab_runs_provisional += ab_run and not _calibrated(night)
                    tal.unmeasurable += night.state is State.UNMEASURABLE
                    tal.provisional += not _calibrated(night)
                    for m, hit in alarms.items():
                        tal.alarms[m] += hit
            for t0 in inject_at:
                for z_idx, size in enumerate(sizes):
                    y = x.copy()
                    y[t0:] *= 1.0 + size / 100.0
                    hit = dict.fromkeys(METHODS, False)
                    prev_plain = plains[t0 - 1]
                    screened = []
                    walked = states[:t0]
                    for t in (t0, t0 + 1):
                        alarms, night, prev_plain, _, decided = rp.night(y, t, prev_plain, size, [t, t0, z_idx + 1],
                                                                        walked)
                        walked = [*walked, decided]
                        screened.append(night.state)
                        for m in METHODS:
                            hit[m] = hit[m] or alarms[m]
                    measurable = screened[0] is not State.UNMEASURABLE
                    for tal in tallies:
                        tal.trials[size] += 1
                        tal.inject_unmeasurable += not measurable
                        tal.trials_measurable[size] += measurable
                        for m in METHODS:
                            tal.detected[(m, size)] += hit[m]
                            tal.detected_measurable[(m, size)] += hit[m] and measurable
    return out


def series_table(series: dict[str, list[float]], policy: Policy) -> list[str]:
    rows = ["| series | A/A CV % | zlops noise % (16 nights) | threshold % | measurable at 5% |",
            "|---|---:|---:|---:|---|"]
    for key, values in series.items():
        sigma = noise_model(values, min_nights=policy.min_nights, quantile=policy.noise_quantile).sigma_pct
        thr = max(policy.potential_pct, policy.k * sigma)
        ok = policy.k * sigma <= policy.measurable_target_pct
        rows.append(f"| {key} | {cv_pct(values):.2f} | {sigma:.2f} | {thr:.2f} | {'yes' if ok else 'no'} |")
    return rows


def _pct(num: float, den: int, scale: float = 100.0) -> float:
    return scale * num / max(den, 1)


def _all_series_table(title: str, methods: Sequence[str], groups: Sequence[dict[str, Tally]]) -> list[str]:
    """Per method, the alarms per 1,000 case-nights of every series, in the real order and all orders."""
    lines = [title, "", "| method | real order | all orders |", "|---|---:|---:|"]
    for m in methods:
        cells = []
        for kind in ("real", "all"):
            alarms, nights = sum(g[kind].alarms[m] for g in groups), sum(g[kind].nights for g in groups)
            cells.append(f"{_pct(alarms, nights, 1000):.2f} ({alarms} of {nights})")
        lines.append(f"| {m} | {' | '.join(cells)} |")
    return lines


def report(result: dict[str, dict[str, Tally]], sizes: Sequence[float]) -> list[str]:
    groups = [result[g] for g in ("quiet", "noisy")]
    lines = _all_series_table("### All series: false alarms per 1,000 case-nights", METHODS, groups)
    lines += ["", *_all_series_table("### All series: false improvements per 1,000 case-nights "
                                     "(an A/A night announced faster)", FALSE_IMPROVEMENT, groups)]
    lines.append("")
    for group, title in (("quiet", "A/A noise < 1% (CV)"), ("noisy", "A/A noise >= 1% (CV)")):
        real, every = result[group]["real"], result[group]["all"]
        header = " | ".join(f"detected {s:g}%" for s in sizes)
        lines += [f"### Series with {title}", "",
                  (f"False alarms per 1,000 case-nights (count in brackets): real order {real.nights} "
                   f"case-nights, all orders {every.nights}. Detection: {every.trials[sizes[0]]} injections "
                   "per size, all orders."), "",
                  f"| method | FA/1000 real order | FA/1000 all orders | {header} |",
                  "|---|---:|---:|" + "---:|" * len(sizes)]
        for m in METHODS:
            det = " | ".join(f"{_pct(every.detected[(m, s)], every.trials[s]):.1f}%" for s in sizes)
            lines.append(f"| {m} | {_pct(real.alarms[m], real.nights, 1000):.1f} ({real.alarms[m]}) | "
                         f"{_pct(every.alarms[m], every.nights, 1000):.2f} ({every.alarms[m]}) | {det} |")
        lines.append("")
        for m in METHODS[2:]:
            det = ", ".join(f"{_pct(every.detected_measurable[(m, s)], every.trials_measurable[s]):.1f}%"
                            for s in sizes)
            lines.append(f"- {m}, injections on nights judged measurable only: {det}")
        n_inj = sum(every.trials.values())
        lines += ["", (f"zlops on these A/A case-nights (all orders): {_pct(every.unmeasurable, every.nights):.1f}% "
                       f"unmeasurable, {_pct(every.provisional, every.nights):.1f}% provisional (< min_nights of "
                       f"history); A/B runs {_pct(every.ab_runs, every.nights, 1000):.1f} per 1,000 case-nights "
                       f"(+{_pct(every.ab_runs_candidates, every.nights, 1000):.1f} for A/B candidates), "
                       f"{_pct(every.ab_runs_provisional, every.nights, 1000):.1f} of them on provisional nights; "
                       f"{_pct(every.inject_unmeasurable, n_inj):.1f}% of the injections landed on a night judged "
                       "unmeasurable (a coverage gap, by design never detected)."), ""]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--permutations", type=int, default=100, help="random night orders per series (plus the real one)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k", type=float, default=Policy.k)
    ap.add_argument("--min-nights", type=int, default=Policy.min_nights)
    ap.add_argument("--quantile", type=float, default=Policy.noise_quantile,
                    help="q of the between-night noise estimators (0.5 = MAD)")
    ap.add_argument("--alpha", type=float, default=Policy.alpha, help="A/B significance level")
    args = ap.parse_args(argv)
    policy = Policy(k=args.k, min_nights=args.min_nights, noise_quantile=args.quantile, alpha=args.alpha)
    series = load_series(args.data)
    t0 = time.perf_counter()
    result = replay(series, policy=policy, permutations=args.permutations, seed=args.seed)
    print(f"## Noise replay: {args.data.name}, {len(series)} series, {args.permutations} permutations, "
          f"seed {args.seed}\n\nPolicy: k={policy.k:g}, q={policy.noise_quantile:g}, "
          f"min_nights={policy.min_nights}, floor {policy.potential_pct:g}%, severe {policy.regression_pct:g}%, "
          f"A/B {policy.ab_pairs}+{policy.ab_pairs} samples, alpha {policy.alpha:g}\n")
    print("\n".join(series_table(series, policy)))
    print()
    print("\n".join(report(result, SIZES)))
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
