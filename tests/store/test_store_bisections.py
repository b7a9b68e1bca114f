"""Bisections looked up by alert in bulk (SQLite and PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import event

from zlops.alerts.lifecycle import plan_night
from zlops.bisect.search import Target
from zlops.model import BaselinePoint, Comparison, Judgement, Summary, Verdict
from zlops.store import Store
from zlops.store import alerts as store_alerts


def _alerts(store: Store, make, n: int) -> list[int]:
    """``n`` confirmed alerts opened at run n2 (one per case)."""
    store.upsert_run(make.run("n2", sha=2, day=2))
    rows = [Comparison("ops", "npu", f"op{i:03d}", "time", "ms", True, BaselinePoint("n1", make.sha(1), "ms", 4.0, 1),
                       Summary(4.4, 1), Judgement(Verdict.REGRESSION, 10.0, 10.0, 2.0)) for i in range(n)]
    with store.session() as s:
        steps = plan_night(rows, {}, band_pct=2.0)
        return [a.alert.id for a in store_alerts.apply_steps(s, "n2", "ops", steps, band_pct=2.0)]


def test_bisections_of_alerts_equal_bisection_of_alert_in_a_constant_number_of_queries(store: Store, make) -> None:
    ids = _alerts(store, make, 60)
    commits = [make.sha(n) for n in range(1, 6)]
    first = store.open_bisection(suite="ops", pool="npu", device=0, commits=commits,
                                 targets=[Target("op000", "time", "ms", True)], alert_ids=[ids[7], ids[3], ids[5]])
    second = store.open_bisection(suite="ops", pool="npu", device=0, commits=commits[1:],
                                  targets=[Target("op020", "time", "ms", True)], alert_ids=ids[20:50])
    counts = []
    for asked in ([ids[3], ids[5], ids[9]], [ids[3], ids[5], ids[7], ids[9], *ids[15:60]]):
        statements: list[str] = []

        def count(_conn: object, _cursor: object, sql: str, *_args: object, seen: list[str] = statements) -> None:
            seen.append(sql)

        event.listen(store.engine, "before_cursor_execute", count)
        try:
            got = store.bisections_of_alerts(asked)
        finally:
            event.remove(store.engine, "before_cursor_execute", count)
        counts.append(len(statements))
        assert got == {i: b for i in asked if (b := store.bisection_of_alert(i)) is not None}
        assert {b.id for b in got.values()} <= {first.id, second.id}
    assert got[ids[3]].alert_ids == (ids[3], ids[5], ids[7]) and got[ids[33]].alert_ids == tuple(ids[20:50])
    assert counts[0] == counts[1], counts
    assert store.bisections_of_alerts([]) == {} and store.bisections_of_alerts(ids[55:]) == {}
