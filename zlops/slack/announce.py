"""The report step's Slack side: the alert lifecycle, its thread messages, and the night's summary.

:func:`update_alerts` applies tonight's lifecycle steps (:func:`zlops.alerts.lifecycle.plan_night`) and queues
the messages they call for IN THE SAME TRANSACTION, so a re-run report step neither repeats a change
nor loses its announcement. :func:`announce` then sends through the outbox (:mod:`zlops.slack.outbox`):
whatever earlier runs left pending and tonight's thread messages first (oldest first), then the
summary rendered with the permalinks of the figures uploaded so far, its overflow replies, the
overview figures and, when the summary overflowed, the full report in its thread.

A Slack problem never raises out of here: messages stay in the outbox for the next run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from zlops.alerts import messages as alert_messages
from zlops.alerts.explain import attribution_texts, kernels_setting, step_attribution
from zlops.alerts.lifecycle import OPEN_STATES, Alert, AlertState, EventKind, SeriesKey, Step, clusters, plan_night
from zlops.config.settings import Config
from zlops.model import CompareSummary, RunRecord, ShardOutcome
from zlops.report.night_figures import RunFigures
from zlops.slack.notify import NotifyResult, write_payload
from zlops.slack.outbox import FlushReport, SlackSender
from zlops.slack.summary import AlertDigest, slack_summary_messages
from zlops.store import Store, outbox
from zlops.store import alerts as store_alerts

log = logging.getLogger(__name__)

#: Telemetry timelines uploaded with the summary's figures (the rest stay in the artifacts and the report).
MAX_TIMELINES = 8


@dataclass(frozen=True)
class AnnounceResult:
    """The summary's outcome (as before: sent / written / failed, and its payload file) and the flush."""

    slack: NotifyResult
    summary_id: int
    flush: FlushReport


def update_alerts(store: Store, *, run: RunRecord, summary: CompareSummary, channel: str, band_pct: float,
                  trends: Mapping[SeriesKey, Path], previous_sha: str | None = None,
                  config: Config | None = None) -> list[store_alerts.Applied]:
    """Tonight's lifecycle steps, written with the thread messages they call for (one transaction).

    ``previous_sha``: the newest accepted commit before tonight's (:func:`zlops.alerts.lifecycle.previous_commit`),
    where a new alert's range starts when its baseline is tonight's own commit. With ``config``, a new
    regression of a suite that records kernels (``kernels:``) gets a reply in its thread saying, per
    alert, whether its op's compiled kernels changed (zlops.alerts.explain)."""
    def apply(s: Any) -> list[store_alerts.Applied]:
        open_alerts, done = store_alerts.night_state(s, summary.suite, run.run_key)
        steps = plan_night(summary.comparisons, open_alerts, done=done, band_pct=band_pct)
        applied = store_alerts.apply_steps(s, run.run_key, summary.suite, steps, band_pct=band_pct,
                                           previous_sha=previous_sha)
        # a confirmation (opened confirmed, or new -> confirmed) starts the regression's thread
        fresh = [(a.alert, a.step) for a in applied if a.step.announce and a.step.to_state is AlertState.CONFIRMED
                 and a.step.event in (EventKind.OPENED, EventKind.STATE)]
        for members in clusters(fresh).values():
            ids = sorted(alert.id for alert, _ in members)
            payload = alert_messages.announcement([(a, st) for a, st in members if st is not None], channel=channel,
                                                  suite=summary.suite, run_key=run.run_key)
            root = outbox.queue_notification(s, run.run_key, f"alert-{ids[0]}", channel, payload)
            store_alerts.set_thread(s, ids, root)
            _queue_figures(s, run.run_key, f"alert-{ids[0]}-figures", channel, root, members, trends)
            if config is not None and kernels_setting(config, summary.suite) is not None:
                ordered = [a for a, _ in sorted(members, key=lambda m: m[0].id)]
                texts = attribution_texts(s, ordered, config)   # one read of their steps, each night once
                entries = [(a, texts[a.id]) for a in ordered]
                outbox.queue_notification(s, run.run_key, f"alert-{ids[0]}-kernels", channel,
                                          alert_messages.kernels_reply(entries, channel=channel), parent_id=root)
        threads: dict[int, list[tuple[Alert, Step]]] = {}
        fresh_ids = {alert.id for alert, _ in fresh}
        for a in applied:
            if a.step.announce and a.alert.id not in fresh_ids and a.alert.thread_notification_id is not None:
                threads.setdefault(a.alert.thread_notification_id, []).append((a.alert, a.step))
        for root, entries in threads.items():
            payload = alert_messages.thread_update(entries, channel=channel, head_sha=run.sha)
            outbox.queue_notification(s, run.run_key, f"reply-{root}", channel, payload, parent_id=root)
            _queue_figures(s, run.run_key, f"reply-{root}-figures", channel, root, entries, trends)
            worse = [(a, st) for a, st in entries if st.event is EventKind.WORSENED]
            if worse and config is not None and kernels_setting(config, summary.suite) is not None:
                # a further step by another commit: whether that step changed the op's compiled kernels
                memo: dict[tuple[str, str], Any] = {}   # each night's inventories read once for the thread
                lines = [(a, step_attribution(s, a, config, head_run=run.run_key, memo=memo,
                                              base_sha=st.comparison.base.sha if st.comparison.base else None).text)
                         for a, st in worse]
                outbox.queue_notification(s, run.run_key, f"reply-{root}-kernels", channel,
                                          alert_messages.kernels_reply(lines, channel=channel), parent_id=root)
        return applied

    # one unit of work, run again from scratch on a transient database fault (it is idempotent)
    applied = store.unit_of_work(apply)
    if applied:
        log.info("alerts of %s at %s: %s", summary.suite, run.run_key,
                 ", ".join(f"#{a.alert.id} {a.step.from_state.value if a.step.from_state else 'opened'}->"
                           f"{a.step.to_state.value}" for a in applied if a.step.event is not None) or "updates only")
    return applied


def _queue_figures(session: Any, run_key: str, kind: str, channel: str, root: int,
                   members: Sequence[tuple[Alert, Step | None]], trends: Mapping[SeriesKey, Path]) -> None:
    worst = sorted(members, key=lambda m: -((m[1].worse_pct if m[1] else None) or 0.0))
    files = [{"path": str(trends[a.key]), "filename": trends[a.key].name, "title": f"#{a.id} {a.pool} / {a.case}"}
             for a, _ in worst if a.key in trends][: alert_messages.MAX_FIGURES]
    if files:
        outbox.queue_notification(session, run_key, kind, channel, {"channel": channel, "files": files},
                                  parent_id=root)


def alert_digest(store: Store, *, run_key: str, suite: str) -> tuple[AlertDigest, list[str]]:
    """What the lifecycle did at ``run_key`` (from the store, so a re-run renders the same), with
    plain-text lines for the reports."""
    events = store.run_alert_events(run_key)
    changed = {alert.id for alert, _ in events}
    counts: dict[str, int] = {}
    marks: dict[tuple[str, str, str], str] = {}
    lines: list[str] = []
    for alert, event in events:
        label = "worse again" if event["kind"] == "worsened" else event["to_state"].replace("_", " ")
        if event["kind"] == "opened":
            label = "new" if event["to_state"] == AlertState.CONFIRMED.value else "watching"
        counts[label] = counts.get(label, 0) + 1
        marks[alert.key] = f"#{alert.id} {label}"
        if event["announced"]:  # quiet changes (a watch opened or dropped, an acked one worse) are only counted
            lines.append(alert_messages.digest_line(alert, event))
    open_now = store.alerts(suite=suite, states=OPEN_STATES, limit=None)
    for alert in open_now:
        marks.setdefault(alert.key, f"#{alert.id} {alert.state.value.replace('_', ' ')}")
    # where a change awaiting confirmation was first seen: an alert still new, or opened or confirmed tonight
    # (a further step of an older alert is reported under its own baseline's range, not the alert's)
    ranges = {alert.key: alert.commit_range for alert in open_now if alert.state is AlertState.NEW}
    ranges.update({alert.key: alert.commit_range for alert, event in events
                   if event["kind"] == "opened" or event["from_state"] == AlertState.NEW.value})
    still_open = sum(1 for a in open_now if a.id not in changed and a.state is not AlertState.NEW)
    plain = [line.replace("*", "").replace("`", "") for line in lines]
    return AlertDigest(marks=marks, lines=lines, counts=counts, still_open=still_open, ranges=ranges), plain


def announce(store: Store, *, run: RunRecord, summary: CompareSummary, shards: Sequence[ShardOutcome],
             channel: str, client: Any, run_dir: Path, figures: RunFigures, digest: AlertDigest,
             report_files: Sequence[Path], thresholds: tuple[float, float], judge: str,
             expected_pools: Sequence[str] | None, previous_sha: str | None = None,
             coverage: str | None = None) -> AnnounceResult:
    """Send the night: outbox first, then the summary and its thread (see the module docstring); ``coverage``
    is the night's coverage line the summary states (zlops.judge.coverage.night_line)."""
    sender = SlackSender(store, client) if client is not None else None
    report = FlushReport()
    if sender is not None:
        with store.outbox_lock() as held:  # not while the outbox DAG or `alert flush` sends the same messages
            if held:
                sender.flush(report)
    links = figure_links(store, run.run_key, figures.trends, run_dir)
    messages = slack_summary_messages(summary, run=run, shards=shards, channel=channel,
                                      report_path=str(report_files[0]) if report_files else None,
                                      thresholds=thresholds, judge=judge, figures=links, alerts=digest,
                                      expected_pools=expected_pools, previous_sha=previous_sha, coverage=coverage)
    # a replaced run (zlops nightly --replace) posts a new summary: the old one showed the old numbers
    rerun = int(run.meta.get("replace_count", 0) or 0)
    kind = f"summary-r{rerun}" if rerun else "summary"
    main = dict(messages.main)
    if rerun:
        note = f"Re-measured (--replace, re-run {rerun}): these results replace the earlier summary of this run."
        main["text"] = f"{note} {main.get('text', '')}".strip()
        main["blocks"] = [{"type": "context", "elements": [{"type": "mrkdwn", "text": note}]},
                          *main.get("blocks", [])]
    summary_id = store.queue_notification(run.run_key, kind, channel, main)
    for n, payload in enumerate(messages.thread, start=1):
        store.queue_notification(run.run_key, f"{kind}-{n}", channel, payload, parent_id=summary_id)
    overview = [p for _, p in figures.overview() if "telemetry" not in p.name]
    overview += sorted(figures.telemetry.values())[:MAX_TIMELINES]
    if overview:
        store.queue_notification(run.run_key, f"{kind}-figures", channel, {"channel": channel, "files": [
            {"path": str(p), "filename": p.name, "title": p.stem.replace("run__", "").replace("__", " / ")}
            for p in overview]}, parent_id=summary_id)
    if messages.overflowed and report_files:
        store.queue_notification(run.run_key, f"{kind}-report", channel, {
            "channel": channel, "initial_comment": "The full report (the summary did not fit one message)",
            "files": [{"path": str(p), "filename": p.name, "title": p.name} for p in report_files]},
            parent_id=summary_id)
    if sender is not None:
        with store.outbox_lock() as held:  # not while the outbox DAG or `alert flush` sends the same messages
            if held:
                sender.flush(report)
    (item,) = store.outbox_items(ids=[summary_id])
    error: str | None = None
    if client is None:
        status = "written"
    elif item.status == "sent":
        status = "sent"
    else:
        status = "failed"
        error = item.last_error or (f"not sent: {report.stopped}" if report.stopped else "waiting in the outbox")
        log.warning("Slack summary of %s not sent (%s); it stays in the outbox for the next run", run.run_key, error)
    path = write_payload(run_dir, main, status=status, ts=item.ts, error=error)
    return AnnounceResult(NotifyResult(status=status, path=path, ts=item.ts, error=error), summary_id, report)


def figure_links(store: Store, run_key: str, trends: Mapping[SeriesKey, Path], run_dir: Path) -> dict[SeriesKey, str]:
    """Per series, its figure's Slack permalink when uploaded at this run, else its path in the artifacts."""
    permalinks: dict[str, str] = {}
    for item in store.outbox_items(statuses=("sent",), run_key=run_key):
        for f in (item.result or {}).get("files", []):
            if f.get("permalink"):
                permalinks[str(f["path"])] = str(f["permalink"])
    out = {}
    for key, path in trends.items():
        p = PurePath(path)
        rel = p.relative_to(run_dir).as_posix() if p.is_relative_to(run_dir) else p.as_posix()
        out[key] = permalinks.get(str(path), rel)
    return out


def announce_human_change(store: Store, before: Alert, after: Alert, event_id: int, *, note: str,
                          actor: str) -> int | None:
    """Queue the thread reply for a person's change; None when the alert has no thread (never announced)."""
    return store.unit_of_work(queue_human_reply, before, after, event_id, note=note, actor=actor)


def queue_human_reply(session: Any, before: Alert, after: Alert, event_id: int, *, note: str,
                      actor: str) -> int | None:
    """:func:`announce_human_change` in the caller's transaction (with the change itself: zlops.triage.actions).

    Keyed by the event (``event-<id>``), so queuing the reply of one change again returns the same message.
    """
    if after.thread_notification_id is None:
        return None
    (root,) = outbox.outbox_items(session, ids=[after.thread_notification_id])
    payload = alert_messages.human_update(before, after, note=note, actor=actor, channel=root.channel)
    return outbox.queue_notification(session, root.run_key, f"event-{event_id}", root.channel, payload,
                                     parent_id=root.id)
