"""zlops.confirm's judging of an A/B (the runs themselves are covered by the nightly tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zlops import confirm as confirm_mod
from zlops.config import parse_config
from zlops.model import BaselinePoint, CompareSummary, Comparison, Judgement, Verdict


def _summary(threshold: float) -> CompareSummary:
    base = BaselinePoint("nightly:s:1", "a" * 40, "ms", (1.0, 1.0, 1.0))
    c = Comparison("s", "p", "nonzero_1M", "time", "ms", True, base, (1.2, 1.2, 1.2),
                   Judgement(Verdict.SUSPECT, 20.0, 20.0, threshold, "noisy"))
    return CompareSummary("nightly:s:2", "s", "b" * 40, (c,))


@pytest.mark.parametrize(("ab", "want"), [
    (([1.0] * 8, [1.2] * 4 + [1.21] * 4), Verdict.SEVERE),
    (([1.0, 1.01] * 4, [1.0, 1.01] * 4), Verdict.UNCHANGED),
])
def test_a_threshold_above_the_severe_line_is_judged_not_crashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 ab: tuple[list[float], list[float]],
                                                                 want: Verdict) -> None:
    """Seen on an H200: a noisy series' own threshold (5.64%) exceeded the severe line (5%) and the
    A/B statistics raised, failing the whole night."""
    config = parse_config({"home": str(tmp_path), "pools": {"p": {"backend": "cpu", "devices": [0]}},
                           "suites": {"s": {"repo": str(tmp_path / "up"), "command": ["x"], "format": "zlops-json",
                                            "pools": ["p"]}},
                           "judge": "noise", "noise": {"ab_pairs": 8}})
    monkeypatch.setattr(confirm_mod, "confirm_pool",
                        lambda ctx, pool, suspects, **kw: {("nonzero_1M", "time"): ab})
    saved = []
    monkeypatch.setattr(confirm_mod.pipeline, "open_store", lambda cfg: type("S", (), {
        "save_comparisons": lambda self, key, rows: saved.append(rows)})())
    ctx = confirm_mod.pipeline.RunContext(config, "s", "nightly:s:2", "b" * 40)
    out = confirm_mod.confirm(ctx, _summary(threshold=5.64))
    (row,) = out.comparisons
    assert row.verdict is want and "A/B 8+8 runs" in row.judgement.note
    assert saved


def test_confirm_suspect_leaves_non_suspects_and_undecidable_a_b_alone() -> None:
    from zlops.judge import confirm_suspect
    from zlops.stats import Policy

    policy = Policy()
    unchanged = Judgement(Verdict.UNCHANGED, 0.5, 0.5, 2.0, "")
    assert confirm_suspect(unchanged, [1.0] * 8, [2.0] * 8, lower_is_better=True, policy=policy) is unchanged
    suspect = Judgement(Verdict.SUSPECT, 9.0, 9.0, 2.0, "suspect")
    # 4 + 4 runs cannot reach alpha 0.002: the A/B cannot decide, the suspect stays
    undecided = confirm_suspect(suspect, [1.0] * 4, [1.1] * 4, lower_is_better=True, policy=policy)
    assert undecided.verdict is Verdict.SUSPECT and "A/B undecided" in undecided.note
    higher_is_better = confirm_suspect(suspect, [1.0] * 8, [0.9] * 4 + [0.91] * 4, lower_is_better=False,
                                       policy=policy)
    assert higher_is_better.verdict is Verdict.SEVERE  # a 9% throughput drop is worse, and confirmed
