"""An alert's kernel attribution where people read it: ``zlops alert show``, the alert's Slack thread,
the inbox and the series page, from two stored nights written through zlops' own store and lifecycle.

``softmax_8192`` regresses on both pools at the bad night; on ``npu`` the softmax kernel was compiled
to other code (num_warps 4 -> 8), on ``musa`` the kernels are the same (the change is outside them).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select
from triage_nights import BAD_NIGHT, T0, _comparison, _samples, run_key, sha
from triton_cache_factory import write_kernel

from zlops.cli import main
from zlops.config.settings import Config, load_config
from zlops.kernels.triton import parse_cache
from zlops.model import CaseResult, CompareSummary, RunRecord, RunStatus, ShardOutcome, ShardStatus
from zlops.slack.announce import update_alerts
from zlops.steps.context import open_store
from zlops.store import Store
from zlops.store.models import Notification
from zlops.triage.actions import inbox

POOLS = {"npu": "ascend", "musa": "musa"}
KERNELS = ("softmax_kernel_inner", "matmul_kernel", "fill_scalar_kernel")


@dataclass(frozen=True)
class Stored:
    config: Config
    path: Path
    store: Store
    alerts: dict[str, int]


def _build(tmp: Path, *, kernels: bool = True) -> Stored:
    suite = {"repo": str(tmp), "command": ["true"], "format": "zlops-json", "pools": list(POOLS)}
    if kernels:
        suite["kernels"] = "triton"
    path = tmp / "zlops.yaml"
    path.write_text(yaml.safe_dump({"home": str(tmp / "home"), "suites": {"ops": suite}, "slack": {"channel": "#perf"},
                                    "pools": {p: {"backend": b, "devices": [0]} for p, b in POOLS.items()}}))
    config = load_config(path)
    store = open_store(config)
    alerts: dict[str, int] = {}
    for night in (BAD_NIGHT - 1, BAD_NIGHT):
        when = T0 + timedelta(days=night)
        run = RunRecord(run_key(night), "nightly", "ops", sha(night), "main", RunStatus.DONE, True, when,
                        when + timedelta(minutes=40), {})
        store.upsert_run(run)
        for pool, backend in POOLS.items():
            results = [CaseResult("softmax_8192", "time", "ms", True, _samples(pool, "softmax_8192", night))]
            store.record_shard(run.run_key, ShardOutcome(pool, 0, backend, ShardStatus.OK, tmp, 0, when, when),
                               results, identity={"driver": "550.54"})
            cache = tmp / "caches" / str(night) / pool
            for name in KERNELS:
                warps = 8 if (pool, name, night) == ("npu", "softmax_kernel_inner", BAD_NIGHT) else 4
                write_kernel(cache, name, num_warps=warps, size=300)
            if kernels:
                store.record_kernels(run.run_key, pool, 0, parse_cache(cache))
        if night == BAD_NIGHT:
            comparisons = [_comparison(pool, "softmax_8192", night, _samples(pool, "softmax_8192", night),
                                       _samples(pool, "softmax_8192", night - 1)) for pool in POOLS]
            summary = CompareSummary(run.run_key, "ops", run.sha, tuple(comparisons))
            for a in update_alerts(store, run=run, summary=summary, channel="#perf", band_pct=2.0, trends={},
                                   config=config):
                alerts.setdefault(a.alert.pool, a.alert.id)
    return Stored(config, path, store, alerts)


def test_alert_show_and_inbox_say_which_kernel_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = _build(tmp_path)
    assert main(["alert", "show", str(st.alerts["npu"]), "--config", str(st.path)]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  kernels: ")]
    assert line.startswith("  kernels: kernel code changed: softmax_kernel_inner (compiled code ")
    assert line.endswith(", num_warps 4 -> 8)")
    assert main(["alert", "show", str(st.alerts["musa"]), "--config", str(st.path)]) == 0
    expected = ("  kernels: no compiled kernel of this op changed (1 kernel(s): softmax_kernel_inner): the change is "
                "outside the kernels")
    assert expected in capsys.readouterr().out
    items = {i.alert.pool: i.kernels for g in inbox(st.store, config=st.config) for i in g.alerts}
    assert items["npu"] is not None and items["npu"].startswith("kernel code changed: softmax_kernel_inner")
    assert items["musa"] is not None and items["musa"].startswith("no compiled kernel of this op changed")
    assert {i.kernels for g in inbox(st.store) for i in g.alerts} == {None}  # without a config: not computed


def test_the_regressions_thread_gets_the_attribution(tmp_path: Path) -> None:
    st = _build(tmp_path)
    with st.store.session() as s:
        replies = {n.kind: n for n in s.scalars(select(Notification).where(Notification.kind.like("alert-%-kernels")))}
    npu = replies[f"alert-{st.alerts['npu']}-kernels"]
    text = npu.payload["blocks"][0]["text"]["text"]
    assert npu.parent_id is not None and "kernel code changed: softmax_kernel_inner (compiled code" in text
    assert "num_warps 4 -&gt; 8" in text  # escaped for Slack's mrkdwn
    assert f"alert-{st.alerts['musa']}-kernels" in replies


def test_suite_without_kernels_says_so_and_posts_nothing_more(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    st = _build(tmp_path, kernels=False)
    with st.store.session() as s:
        assert not s.scalars(select(Notification).where(Notification.kind.like("alert-%-kernels"))).all()
    assert main(["alert", "show", str(st.alerts["npu"]), "--config", str(st.path)]) == 0
    assert "  kernels: no inventory: suite ops declares no kernel toolchain (kernels: triton records one)" \
        in capsys.readouterr().out


@pytest.mark.airflow
def test_series_page_and_inbox_page_show_it(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from zlops.airflow.ui import COOKIE, create_app

    st = _build(tmp_path)

    class User:
        def get_name(self) -> str:
            return "ana"

    client = TestClient(create_app(st.config, authenticate=User, authorize=lambda u, suite: True))
    client.cookies.set(COOKIE, "session-of-ana")
    page = html.unescape(client.get("/series", params={"suite": "ops", "pool": "npu", "case": "softmax_8192",
                                                       "metric": "time"}).text)
    assert "Compiled kernels: kernel code changed: softmax_kernel_inner (compiled code" in page
    inbox_page = html.unescape(client.get("/alerts").text)
    assert "kernels: kernel code changed: softmax_kernel_inner" in inbox_page
    assert "kernels: no compiled kernel of this op changed" in inbox_page


def test_a_later_kernel_change_that_worsens_an_open_alert_is_attributed_to_its_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seen on the H200 (hold-out 2, docs/evidence/h200_holdout2): a wrapper change opened the alert ("outside
    the kernels"), then another commit changed the op's kernel and made the same series 18% worse. That step
    is a ``worsened`` event of the open alert, and the alert's line must name the kernel change: its opening
    step against its base, then the worsening night against the night before it; the thread's reply about
    the worsening says the step's own attribution."""
    st = _build(tmp_path)
    night = BAD_NIGHT + 1
    when = T0 + timedelta(days=night)
    run = RunRecord(run_key(night), "nightly", "ops", sha(night), "main", RunStatus.DONE, True, when,
                    when + timedelta(minutes=40), {})
    st.store.upsert_run(run)
    worse = tuple(round(v * 1.2, 6) for v in _samples("musa", "softmax_8192", night))
    base = _samples("musa", "softmax_8192", BAD_NIGHT)
    st.store.record_shard(run.run_key, ShardOutcome("musa", 0, "musa", ShardStatus.OK, tmp_path, 0, when, when),
                          [CaseResult("softmax_8192", "time", "ms", True, worse)], identity={"driver": "550.54"})
    cache = tmp_path / "caches" / str(night) / "musa"
    for name in KERNELS:
        write_kernel(cache, name, num_warps=16 if name == "softmax_kernel_inner" else 4, size=300)
    st.store.record_kernels(run.run_key, "musa", 0, parse_cache(cache))
    c = _comparison("musa", "softmax_8192", night, worse, base)
    st.store.save_comparisons(run.run_key, [c])   # as the nightly's compare step does, before the report step
    applied = update_alerts(st.store, run=run, summary=CompareSummary(run.run_key, "ops", run.sha, (c,)),
                            channel="#perf", band_pct=2.0, trends={}, config=st.config)
    assert [a.step.event.value for a in applied if a.step.event] == ["worsened"]
    alert_id = st.alerts["musa"]
    assert main(["alert", "show", str(alert_id), "--config", str(st.path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("kernels:"))
    assert f"opened at {sha(BAD_NIGHT - 1)[:7]}..{sha(BAD_NIGHT)[:7]}: no compiled kernel of this op changed" in line
    assert (f"; worse again at {sha(BAD_NIGHT)[:7]}..{sha(night)[:7]}, +" in line
            and "kernel code changed: softmax_kernel_inner (compiled code" in line and "num_warps 4 -> 16" in line)
    with st.store.session() as s:
        replies = [n for n in s.scalars(select(Notification).where(Notification.kind.like("reply-%-kernels")))]
    (reply,) = replies
    text = reply.payload["blocks"][0]["text"]["text"]
    assert reply.parent_id is not None and "kernel code changed: softmax_kernel_inner" in text
    assert "opened at" not in text   # the reply is about tonight's step alone
