"""The H200 bisection of issue 16 (tests/data/flaggems_h200/bisect/), replayed on the CPU.

The recorded bisection ran `zlops bisect` on a real H200 over 8 first-parent FlagGems commits and found
"abs: compute twice". Its stored steps hold every benchmark process's value; replaying them through the
product's search (:func:`zlops.bisect.search.bisect_range`, the proof's policy) must take the same steps to the
same verified culprit with the same builds, and the alert page's culprit block must show it.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Sequence
from pathlib import Path

from zlops.bisect.messages import culprit_block
from zlops.bisect.search import (
    Allowance,
    Bisection,
    BisectPolicy,
    Key,
    Outcome,
    State,
    StepKind,
    StepRecord,
    Target,
    bisect_range,
    builds_bound,
    evidence_from_json,
)

DATA = Path(__file__).parent / "data" / "flaggems_h200" / "bisect" / "bisection.json"


def _recorded() -> tuple[dict, list[StepRecord]]:
    data = json.loads(DATA.read_text())
    steps = [StepRecord(StepKind(s["kind"]), s["sha"], s["base_sha"], s["position"], Outcome(s["outcome"]), s["pairs"],
                        s["seconds"], s["builds"], evidence_from_json(s["evidence"]), s["note"]) for s in data["steps"]]
    return data, steps


class RecordedProcesses:
    """Each commit's benchmark processes in the order the H200 ran them (per case, its value)."""

    def __init__(self, steps: Sequence[StepRecord]) -> None:
        self.queues: dict[str, deque[dict[Key, float]]] = defaultdict(deque)
        for s in steps:
            for sha, side in ((s.base_sha, "runs_base"), (s.sha, "runs_head")):
                n = len(getattr(s.evidence[0].figures, side))
                for i in range(n):
                    self.queues[sha].append({(e.case, e.metric): getattr(e.figures, side)[i] for e in s.evidence})
        self.builds: list[str] = []

    def build(self, sha: str) -> None:
        self.builds.append(sha)

    def run(self, sha: str, targets: Sequence[Target]) -> tuple[dict[Key, float], float]:
        return self.queues[sha].popleft(), 14.0


def test_the_h200_bisection_replays_to_the_same_verified_culprit() -> None:
    data, recorded = _recorded()
    b = data["bisection"]
    commits = b["commits"]
    targets = [Target(t["case"], t["metric"], t["unit"], t["lower_is_better"]) for t in b["targets"]]
    assert len(commits) == 9 and b["culprit_subject"] == "abs: compute twice" and b["state"] == "found"
    # the proof's policy (benchmarks/h200/bisect_flaggems.sh): two pairs a step, the median statistic
    policy = BisectPolicy(min_pairs=2, max_pairs=2, extend_pairs=2, statistic="median")
    m = RecordedProcesses(recorded)
    saved: list[StepRecord] = []
    res = bisect_range(commits, targets, m, policy=policy, allowance=Allowance(16, 1e9), save=saved.append)
    assert res.state is State.FOUND and commits[res.culprit] == b["culprit_sha"] and res.culprit == 6
    assert [(s.kind, s.position, s.outcome) for s in saved] == [(s.kind, s.position, s.outcome) for s in recorded]
    assert res.builds == 5 == builds_bound(8) and all(not q for q in m.queues.values())
    # every stored figure is what the replay computed from the same runs
    for mine, theirs in zip(saved, recorded, strict=True):
        for a, c in zip(mine.evidence, theirs.evidence, strict=True):
            assert (a.case, a.metric, a.outcome) == (c.case, c.metric, c.outcome)
            assert a.figures.reference == c.figures.reference and a.figures.value == c.figures.value
    # the 1G-element shapes moved by ~+100% (latency) and held within 0.1% on the good side
    verify = recorded[-1]
    lat = next(e for e in verify.evidence if e.case == "abs/float16/(1073741824)" and e.metric == "latency")
    assert 99 < lat.figures.change_pct < 101


def test_the_alert_page_block_of_the_h200_bisection() -> None:
    data, steps = _recorded()
    b = data["bisection"]
    bis = Bisection(id=b["id"], suite="flaggems", pool=b["pool"], device=b["device"], good_sha=b["commits"][0],
                    bad_sha=b["commits"][-1], commits=tuple(b["commits"]),
                    targets=tuple(Target(**t) for t in b["targets"]), state=State(b["state"]), reason=b["reason"],
                    culprit_sha=b["culprit_sha"], culprit_subject=b["culprit_subject"],
                    culprit_author=b["culprit_author"], candidates=(), alert_ids=tuple(b["alert_ids"]))
    html = culprit_block(bis, steps, alert_id=14)
    assert f"<code>{b['culprit_sha']}</code> abs: compute twice — zlops &lt;zlops@example.invalid&gt;" in html
    assert "the culprit against its parent: <code>fde09c4</code> vs <code>3936190</code>" in html
    assert "+99.66%" in html and "2+2" in html           # the verify A/B's stored latency change and its runs
    assert "3 step(s) over 8 commit(s) (0 skipped), 5 build(s), 287 s of device time on h200/0" in html
    assert html.count("<tr><td>step</td>") == 3 and "also the culprit search of alerts #11, #12, #13, #15, #16" in html
