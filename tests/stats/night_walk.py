"""The nightly screening walked night by night, as the nightly applies it: shared by the tests of issue 22's rules.

Each night: the series' history as ``zlops.judge.evidence.series_histories`` builds it from the nights so far
and their stored verdicts (a confirmed change restarts it, unresolved suspects stay out), judged by the
vectorized judge (``noise_judge_many``, the production path) and by the per-series one, which must agree;
the verdict is stored as the nightly stores it. No A/B runs here: what nights alone may decide.
Used by tests/stats/test_stats_night_rules.py (synthetic walks) and tests/stats/test_perfherder_holdout.py
(real Mozilla Perfherder series).
"""

from __future__ import annotations

import pandas as pd
import pytest

from zlops.judge.evidence import series_histories
from zlops.judge.judges import noise_judge, noise_judge_many
from zlops.model import Judgement, Summary, Thresholds, Verdict
from zlops.stats import Policy

KEY = ("pool", "op/case", "throughput")
CONFIRMED = {Verdict.REGRESSION, Verdict.SEVERE, Verdict.IMPROVED}
STORED = CONFIRMED | {Verdict.SUSPECT, Verdict.SUSPECT_IMPROVED}


def walk(values: list[float], *, lower_is_better: bool, policy: Policy | None = None,
         first: int = 1) -> list[Judgement]:
    """Judge nights ``first``.. of ``values`` one after another; returns their judgements (night i at i - first)."""
    pol = policy or Policy()
    evidence: dict[tuple[str, str, str, str], tuple[Verdict, object]] = {}
    out = []
    for t in range(first, len(values)):
        frame = pd.DataFrame({"pool": KEY[0], "case": KEY[1], "metric": KEY[2],
                              "run_key": [f"n{i}" for i in range(t)], "median": values[:t]}).tail(pol.window + 1)
        history, processes, settled = series_histories(frame, {KEY}, evidence=evidence)
        base = Summary(values[t - 1], 1)
        fast = noise_judge_many([(base, [values[t]], lower_is_better, history[KEY], None, processes[KEY])],
                                Thresholds(), policy=pol, settled=[KEY in settled])[0]
        one = noise_judge(base, [values[t]], lower_is_better, Thresholds(), history=list(history[KEY]), policy=pol,
                          processes=list(processes[KEY]), last_settled=KEY in settled)
        assert (fast.verdict, fast.note) == (one.verdict, one.note), t
        assert fast.worse_pct == pytest.approx(one.worse_pct) and fast.threshold_pct == pytest.approx(one.threshold_pct)
        if fast.verdict in STORED:
            evidence[(f"n{t}", *KEY)] = (fast.verdict, fast.figures)
        out.append(fast)
    return out
