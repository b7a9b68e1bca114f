"""Judge the live H200 nights (benchmarks/h200/live_nights.py output) with the plain 2% rule and with zlops.

    python benchmarks/live_analysis.py [--nights benchmarks/data/h200_live_nights_2026-11-29.jsonl]
                                       [--ab-nights benchmarks/data/h200_live_ab_nights_2026-11-29.jsonl]

Two recorded sessions on one H200 (fresh process per night, suites/torch_ops, zlops.timing):
- ``nights``: 14 A/A nights, then 3 nights each with 2, 3, 5, 10% more work in six bandwidth-bound
  cases (the other six cases stay A/A for all 26 nights); 6 interleaved A/B pairs per injected night.
- ``ab-nights``: 4 A/A nights then 2 nights per size, 10 A/B pairs per night *including the A/A
  nights* (A against A), which is what measures the A/B's own false alarms.

False alarms: every A/A case-night with a previous night (the plain rule compares with it; zlops
judges with the accepted nights before it as history and the previous night as baseline).
Detection: each injected night is judged against the session's A/A history (the slowdown lands
after a stable stretch, as a real regression does): the plain rule against the last A/A night;
zlops confirms either by the same night's A/B (``ab-nights``, 10 pairs) or by two consecutive
injected nights of the same size (both sessions). Prints markdown tables.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from zlops.judge.judges import change_pct, noise_judge
from zlops.model import Thresholds, Verdict
from zlops.stats import NightResult, Policy, State, confirm_ab, decide

DATA = Path(__file__).resolve().parent / "data"
T = Thresholds(2.0, 5.0)
POLICY = Policy()
ALARM = (Verdict.REGRESSION, Verdict.SEVERE)


def load(path: Path) -> tuple[dict[str, dict[int, dict]], dict[tuple[str, int], dict]]:
    nights: dict[str, dict[int, dict]] = defaultdict(dict)
    ab: dict[tuple[str, int], dict] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["kind"] == "night":
            nights[rec["case"]][rec["night"]] = rec
        else:
            ab[(rec["case"], rec["night"])] = rec
    return nights, ab


def between_noise_pct(medians: Sequence[float]) -> float:
    """Robust night-to-night spread: 1.4826 x MAD / median, in percent."""
    med = statistics.median(medians)
    return 1.4826 * statistics.median(abs(m - med) for m in medians) / med * 100


def judge(history: list[float], tonight: list[float], baseline: list[float]) -> Verdict:
    return noise_judge(baseline, tonight, True, T, history=history, policy=POLICY).verdict


def ab_verdict(history: list[float], tonight: list[float], baseline: list[float], ab: dict | None) -> Verdict:
    """The noise judge, then the same-night A/B for a suspect (if one was recorded)."""
    j = noise_judge(baseline, tonight, True, T, history=history, policy=POLICY)
    if j.verdict is not Verdict.SUSPECT or ab is None:
        return j.verdict
    night = NightResult(State.SUSPECT, j.change_pct, j.worse_pct, j.threshold_pct, None, None, None, j.note)
    conf = confirm_ab(ab["base"], ab["head"], threshold_pct=j.threshold_pct or 2.0, severe_pct=5.0,
                      alpha=POLICY.alpha, seed=0)
    return {"regression": Verdict.REGRESSION, "severe": Verdict.SEVERE}.get(
        decide(night, ab=conf, policy=POLICY).state.value, Verdict.UNCHANGED)


def aa_nights(series: dict[int, dict]) -> list[int]:
    return sorted(n for n, r in series.items() if not r["inject"])


def false_alarms(nights: dict[str, dict[int, dict]], ab: dict[tuple[str, int], dict], quiet: set[str],
                 ) -> dict[str, dict[str, list[int]]]:
    """Per method and noise group, [alarms, case-nights] over A/A nights."""
    out: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for case, series in nights.items():
        group = "<1%" if case in quiet else ">=1%"
        aa = aa_nights(series)
        for i in range(1, len(aa)):
            prev, cur = series[aa[i - 1]], series[aa[i]]
            history = [series[n]["median"] for n in aa[:i]]
            checks = {
                "plain 2% rule": change_pct(prev["median"], cur["median"]) > 2.0,
                "zlops, two nights": judge(history, cur["samples"], prev["samples"]) in ALARM,
            }
            if (case, aa[i]) in ab:
                checks["zlops, A/B"] = ab_verdict(history, cur["samples"], prev["samples"], ab[(case, aa[i])]) in ALARM
            for method, alarm in checks.items():
                for g in (group, "all"):
                    out[method][g][0] += int(alarm)
                    out[method][g][1] += 1
    return out


def detection(nights: dict[str, dict[int, dict]], ab: dict[tuple[str, int], dict], quiet: set[str],
              use_ab: bool, session: str) -> dict[str, dict[float, list[int]]]:
    """Per method, per size: [detected, trials] over injected nights of quiet (<1%) injectable series."""
    out: dict[str, dict[float, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for case, series in nights.items():
        if case not in quiet:
            continue
        aa = aa_nights(series)
        history = [series[n]["median"] for n in aa]
        last = series[aa[-1]]
        by_size: dict[float, list[int]] = defaultdict(list)
        for n, r in sorted(series.items()):
            if r["inject"]:
                by_size[round(r["inject"], 4)].append(n)
        for size, ns in by_size.items():
            for n in ns:
                r = series[n]
                hit = change_pct(last["median"], r["median"]) > 2.0
                out["plain 2% rule (first night)"][size][0] += int(hit)
                out["plain 2% rule (first night)"][size][1] += 1
                if use_ab and (case, n) in ab:
                    v = ab_verdict(history, r["samples"], last["samples"], ab[(case, n)])
                    out["zlops, A/B (first night)"][size][0] += int(v in ALARM)
                    out["zlops, A/B (first night)"][size][1] += 1
            for a, b in itertools.pairwise(ns):  # a change is confirmed on its second night at the latest
                first = judge(history, series[a]["samples"], last["samples"])
                second = judge([*history, series[a]["median"]], series[b]["samples"], series[a]["samples"])
                hit = first in ALARM or second in ALARM
                key = f"zlops, two nights (by the 2nd night), {session}: {len(aa)} A/A nights of history"
                out[key][size][0] += int(hit)
                out[key][size][1] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nights", type=Path, default=DATA / "h200_live_nights_2026-11-29.jsonl")
    ap.add_argument("--ab-nights", type=Path, default=DATA / "h200_live_ab_nights_2026-11-29.jsonl")
    args = ap.parse_args()
    sessions = {"nights": load(args.nights), "ab-nights": load(args.ab_nights)}
    nights1, _ = sessions["nights"]
    noise = {case: between_noise_pct([s[n]["median"] for n in aa_nights(s)]) for case, s in nights1.items()}
    quiet = {c for c, v in noise.items() if v < 1.0}
    print("A/A between-night noise per case (1.4826 x MAD / median, session 1):")
    print(", ".join(f"{c} {v:.2f}%" for c, v in sorted(noise.items(), key=lambda kv: kv[1])))
    print()
    fa_total: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    det_total: dict[str, dict[float, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for name, (nights, ab) in sessions.items():
        use_ab_for_fa = {k: v for k, v in ab.items() if name == "ab-nights"}
        for method, groups in false_alarms(nights, use_ab_for_fa, quiet).items():
            for g, (a, n) in groups.items():
                fa_total[method][g][0] += a
                fa_total[method][g][1] += n
        for method, sizes in detection(nights, ab, quiet, use_ab=name == "ab-nights", session=name).items():
            for s, (d, n) in sizes.items():
                det_total[method][s][0] += d
                det_total[method][s][1] += n
    print("| method | false alarms / 1,000 case-nights (all) | (noise <1%) | case-nights (all) |")
    print("|---|---:|---:|---:|")
    for method, g in fa_total.items():
        a, n = g["all"]
        q_a, q_n = g["<1%"]
        print(f"| {method} | {1000 * a / n:.1f} ({a}/{n}) | {1000 * q_a / max(q_n, 1):.1f} ({q_a}/{q_n}) | {n} |")
    print()
    sizes = sorted({s for m in det_total.values() for s in m})
    print("| method (series with noise <1%) | " + " | ".join(f"{s:.0%} detected" for s in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for method, by in det_total.items():
        cells = [f"{100 * by[s][0] / by[s][1]:.0f}% ({by[s][0]}/{by[s][1]})" if by[s][1] else "-" for s in sizes]
        print(f"| {method} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
