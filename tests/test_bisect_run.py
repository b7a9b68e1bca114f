"""What the nightly asks to bisect (zlops.bisect.run.alerts_to_bisect): the same alerts, in a number of store
queries and git calls that does not grow with the number of alerts the night confirmed."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import event

import zlops.host.gitops as gitops
from zlops.alerts.lifecycle import plan_night
from zlops.bisect import run as bisect_run
from zlops.bisect.search import Target
from zlops.config.settings import Config, parse_config
from zlops.model import BaselinePoint, Comparison, Judgement, RunRecord, RunStatus, Summary, Verdict
from zlops.steps.context import open_store
from zlops.store import alerts as store_alerts


def sha(n: int) -> str:
    return f"{n:040x}"


def _config(tmp_path: Path) -> Config:
    return parse_config({
        "home": str(tmp_path / "home"), "database": f"sqlite:///{tmp_path}/z.db",
        "pools": {"npu": {"backend": "cpu", "devices": [0]}},
        "suites": {"ops": {"repo": str(tmp_path / "none.git"), "branch": "main", "install": [], "command": ["true"],
                           "format": "zlops-json", "pools": ["npu"]}}}, source="test.yaml")


def _night(config: Config, n: int) -> list[int]:
    """Night 2 confirms ``n`` regressions over the range night 1 .. night 2 (one alert each); the first
    three are already in a bisection that is paused (not finished)."""
    store = open_store(config)
    for night in (1, 2):
        store.upsert_run(RunRecord(f"n{night}", "nightly", "ops", sha(night), "main", RunStatus.DONE))
    rows = [Comparison("ops", "npu", f"op{i:03d}", "time", "ms", True, BaselinePoint("n1", sha(1), "ms", 4.0, 1),
                       Summary(4.4, 1), Judgement(Verdict.REGRESSION, 10.0, 10.0, 2.0)) for i in range(n)]
    with store.session() as s:
        ids = [a.alert.id for a in store_alerts.apply_steps(s, "n2", "ops", plan_night(rows, {}, band_pct=2.0),
                                                            band_pct=2.0)]
    store.open_bisection(suite="ops", pool="npu", device=0, commits=[sha(1), sha(9), sha(2)],
                         targets=[Target("op000", "time", "ms", True)], alert_ids=ids[:3])
    return ids


@pytest.mark.parametrize("n", [4, 40])
def test_alerts_to_bisect_reads_the_store_and_git_once_for_all_alerts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      n: int) -> None:
    config = _config(tmp_path)
    ids = _night(config, n)
    ranges: list[tuple[str, str]] = []
    monkeypatch.setattr(gitops, "ensure_mirror", lambda repo, path: gitops.Mirror(path, repo))

    def first_parent_range(mirror: object, good: str, bad: str, *, max_commits: int) -> list[str]:
        ranges.append((good, bad))
        return [good, sha(7), sha(8), bad]

    monkeypatch.setattr(gitops, "first_parent_range", first_parent_range)
    store = open_store(config)
    statements: list[str] = []

    def count(_conn: object, _cursor: object, sql: str, *_args: object) -> None:
        statements.append(sql)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        asked = bisect_run.alerts_to_bisect(config, "n2")
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    # the new ones (a 3-commit range), and the paused bisection's first alert to resume it
    assert asked == sorted([ids[0], *ids[3:]])
    assert ranges == [(sha(1), sha(2))]               # one range for every alert of the night
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) <= 12, len(selects)                 # the same for 4 and 40 alerts (was 2 per alert and more)
