"""Bisection end to end: a real git upstream, real worktrees and uv venvs, benchmark processes on the CPU pool.

Two nightlies (the good night, then the bad night 8 commits later) confirm a ~30% slowdown of ``alpha``;
``zlops bisect`` then finds the commit that made it, verifies it against its parent, records it, and
queues one reply in the alert's thread. The fake upstream's timings are exact, so every step decides
at its first pairs and the steps taken are known in advance.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from bisect_upstream import BisectUpstream
from fake_upstream import config_data

from zlops.bisect import run as bisect_run
from zlops.bisect.search import Outcome, State, StepKind, Target, builds_bound
from zlops.cli import main
from zlops.config.settings import Config, parse_config
from zlops.errors import ZlopsError
from zlops.steps.context import open_store
from zlops.steps.nightly import run_nightly

pytestmark = pytest.mark.slow

BASE = {"alpha": 1.0, "beta": 2.0}
SLOW = {"alpha": 1.3, "beta": 2.0}


def _config(tmp_path: Path, up: BisectUpstream, *, pools: Sequence[str] = ("local",)) -> Config:
    data = config_data(tmp_path / "home", up.path, devices=(0,))
    data["pools"] = {p: {"backend": "cpu", "devices": [i]} for i, p in enumerate(pools)}  # type: ignore[index]
    data["suites"]["fake"]["pools"] = list(pools)  # type: ignore[index]
    data["bisect"] = {"min_pairs": 2, "max_pairs": 4}
    return parse_config(data, source="test.yaml")


def _nights(config: Config, good: str, bad: str) -> None:
    for label, sha in (("n1", good), ("n2", bad)):
        out = run_nightly(config, "fake", sha=sha, run_label=label)
        assert out.ok, label


def _culprit_messages(config: Config) -> list[tuple[int | None, str, dict]]:
    store = open_store(config)
    return [(i.parent_id, i.kind, dict(i.payload)) for i in store.outbox_items(statuses=("pending", "sent", "failed"))
            if i.kind.startswith(("culprit-", "bisect-"))]


def test_bisection_finds_verifies_and_groups_the_culprit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    up = BisectUpstream(tmp_path / "upstream")
    shas = [up.commit(BASE, "c0: the good night")]
    for i in range(1, 9):
        shas.append(up.commit(SLOW if i >= 5 else BASE, f"c{i}: " + ("alpha: unroll the inner loop" if i == 5
                                                                       else "docs")))
    config = _config(tmp_path, up, pools=("local", "other"))
    _nights(config, shas[0], shas[8])
    store = open_store(config)
    alerts = sorted(store.alerts(suite="fake"), key=lambda a: a.pool)
    assert [(a.pool, a.case, a.state.value) for a in alerts] == [("local", "alpha", "confirmed"),
                                                                ("other", "alpha", "confirmed")]
    # the report step's request: both alerts, each over a range of 8 commits
    assert bisect_run.alerts_to_bisect(config, "nightly:fake:n2") == sorted(a.id for a in alerts)

    first = bisect_run.bisect_alert(config, alerts[0].id)
    b = first.bisection
    assert b.state is State.FOUND and b.culprit_sha == shas[5]
    assert b.culprit_subject == "c5: alpha: unroll the inner loop" and b.culprit_author == "T <t@example.com>"
    steps = store.bisection_steps(b.id)
    assert [(s.kind, s.position, s.outcome) for s in steps] == [
        (StepKind.REPRODUCE, 8, Outcome.BAD), (StepKind.STEP, 4, Outcome.GOOD), (StepKind.STEP, 6, Outcome.BAD),
        (StepKind.STEP, 5, Outcome.BAD), (StepKind.VERIFY, 5, Outcome.BAD)]
    assert sum(s.builds for s in steps) == 5 == builds_bound(8)
    verify = steps[-1].evidence[0]
    assert verify.figures.change_pct == pytest.approx(30.0, abs=0.5) and (verify.case, verify.metric) == ("alpha", "time")
    assert b.targets == (Target("alpha", "time", "ms", True),)

    # the first reply is in its thread and was sent before the second bisection ends
    t1, t2 = (a.thread_notification_id for a in alerts)
    prefix = f"culprit-{shas[5][:12]}"
    (sent,) = [i for i in store.outbox_items(statuses=("pending",)) if i.kind.startswith(prefix)]
    assert (sent.parent_id, sent.kind) == (t1, f"{prefix}-t{t1}-b{b.id}")
    store.mark_notification(sent.id, "sent", ts="1.0", channel_id="C1")

    # the second pool's alert: the known culprit and its parent are tested first (no new search)
    second = bisect_run.bisect_alert(config, alerts[1].id).bisection
    assert second.state is State.FOUND and second.culprit_sha == shas[5] and second.id != b.id
    assert [s.position for s in store.bisection_steps(second.id) if s.kind is StepKind.STEP] == [5, 4]

    # one message per thread naming every alert with this culprit; the first thread, whose reply was
    # already sent naming only its own alert, gets a new reply naming both
    messages = _culprit_messages(config)
    assert sorted((parent, kind) for parent, kind, _ in messages) == sorted([
        (t1, f"{prefix}-t{t1}-b{b.id}"), (t1, f"{prefix}-t{t1}-b{second.id}"), (t2, f"{prefix}-t{t2}-b{second.id}")])
    for _, kind, payload in messages:
        text = payload["text"]
        assert shas[5][:12] in text and f"#{alerts[0].id}" in text
        assert (f"#{alerts[1].id}" in text) is kind.endswith(f"-b{second.id}")

    # idempotent: a rerun (an Airflow retry) measures nothing and adds no row or message
    again = bisect_run.bisect_alert(config, alerts[0].id)
    assert again.bisection.id == b.id and len(store.bisection_steps(b.id)) == 5
    assert len(_culprit_messages(config)) == 3

    # the alert page's culprit block: the culprit, the verify A/B's stored figures, every step
    from zlops.bisect.messages import alert_culprit_block

    block = alert_culprit_block(store, alerts[0].id)
    verify_e = steps[-1].evidence[0]
    assert f"<code>{shas[5]}</code> c5: alpha: unroll the inner loop — T &lt;t@example.com&gt;" in block
    assert "+30.0" in block and f"{len(verify_e.figures.runs_base)}+{len(verify_e.figures.runs_head)}" in block
    assert block.count("<tr><td>verify</td>") == 1 and block.count("<tr><td>step</td>") == 3
    assert alert_culprit_block(store, 10_000) == ""

    cfg = tmp_path / "zlops.yaml"
    import yaml

    cfg.write_text(yaml.safe_dump(config.model_dump(mode="json", exclude_none=True)))
    capsys.readouterr()
    assert main(["--plain", "alert", "show", str(alerts[0].id), "--config", str(cfg)]) == 0
    shown = capsys.readouterr().out
    assert f"culprit {shas[5][:12]}" in shown and "verify" in shown and "+30.00%" in shown
    # untrusted ids are refused before anything runs
    assert main(["--plain", "bisect", "1;rm -rf /", "--config", str(cfg)]) == 2
    assert main(["--plain", "bisect", "-5", "--config", str(cfg)]) == 2


class CrashAfter:
    """The real measurer, killed (as a worker would be) after ``runs`` benchmark processes."""

    def __init__(self, inner: bisect_run.DeviceMeasurer, runs: int) -> None:
        self.inner, self.left, self.ran = inner, runs, []

    def build(self, sha: str) -> None:
        self.inner.build(sha)

    def run(self, sha: str, targets: Sequence[Target]) -> tuple[dict[tuple[str, str], float], float]:
        if self.left <= 0:
            raise RuntimeError("worker killed")
        self.left -= 1
        self.ran.append(sha)
        return self.inner.run(sha, targets)


def test_bisection_skips_and_resumes_after_a_crash(tmp_path: Path) -> None:
    up = BisectUpstream(tmp_path / "upstream")
    shas = [up.commit(BASE, "c0")]
    for i in range(1, 9):
        if i == 4:
            shas.append(up.commit_special(BASE, "c4: broken build", broken=True))
        elif i == 3:
            shas.append(up.commit_special(BASE, "c3: flaky timer", alternate={"alpha": 1.3}))
        else:
            shas.append(up.commit(SLOW if i >= 6 else BASE, f"c{i}"))
    config = _config(tmp_path, up)
    _nights(config, shas[0], shas[8])
    store = open_store(config)
    (alert,) = store.alerts(suite="fake")

    measurers: list[CrashAfter] = []

    def crashing(b: object) -> CrashAfter:
        m = CrashAfter(bisect_run.DeviceMeasurer(config, "fake", "local", 0, b.id), runs=10)  # type: ignore[attr-defined]
        measurers.append(m)
        return m

    with pytest.raises(RuntimeError, match="worker killed"):
        bisect_run.bisect_alert(config, alert.id, measurer_factory=crashing)
    b = store.bisection_of_alert(alert.id)
    before = store.bisection_steps(b.id)
    # reproduce (8 runs: the rank CI of the shift needs 4 + 4 at 95%), then c4 did not build (no run), then c3
    # was on its 3rd run when the worker died
    assert [(s.kind, s.position, s.outcome) for s in before] == [
        (StepKind.REPRODUCE, 8, Outcome.BAD), (StepKind.STEP, 4, Outcome.SKIPPED)]
    assert "did not build" in before[1].note
    assert b.state is State.RUNNING

    resumed = []

    def counting(b2: object) -> CrashAfter:
        m = CrashAfter(bisect_run.DeviceMeasurer(config, "fake", "local", 0, b2.id), runs=10_000)  # type: ignore[attr-defined]
        resumed.append(m)
        return m

    out = bisect_run.bisect_alert(config, alert.id, measurer_factory=counting)
    assert out.bisection.state is State.FOUND and out.bisection.culprit_sha == shas[6]
    steps = store.bisection_steps(b.id)
    assert [(s.kind, s.position, s.outcome) for s in steps] == [
        (StepKind.REPRODUCE, 8, Outcome.BAD), (StepKind.STEP, 4, Outcome.SKIPPED),
        (StepKind.STEP, 3, Outcome.UNCLEAR), (StepKind.STEP, 5, Outcome.GOOD), (StepKind.STEP, 6, Outcome.BAD),
        (StepKind.VERIFY, 6, Outcome.BAD)]
    assert "straddles" in steps[2].note and steps[2].pairs == 4
    # the stored reproduce step was not measured again: the bad end never ran after the crash
    assert shas[8] not in resumed[0].ran
    with pytest.raises(ZlopsError, match="positive integer"):
        bisect_run.bisect_alert(config, "1 OR 1=1")
    with pytest.raises(ZlopsError, match="positive integer"):
        bisect_run.validate_alert_id(True)
