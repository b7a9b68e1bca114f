"""Slack messages of the alert lifecycle (pure): a regression's first message, its thread replies.

A regression is announced once, as a channel message that starts its thread: one message per
(commit range x op family x pool) cluster of alerts confirmed the same night. Later state changes
of any alert in it (fixed, worse again, acked by a person ...) are replies in that thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zlops.alerts.lifecycle import Alert, AlertState, EventKind, Step
from zlops.campaign import scaling
from zlops.model import Figures
from zlops.report import cells

#: Series listed in a regression's first message; the rest are counted (the report lists them all).
MAX_LINES = 20
#: Trend figures uploaded into a regression's thread (its worst series).
MAX_FIGURES = 4
MAX_SECTION_CHARS = 3000

EMOJI = {
    "opened": ":red_circle:", AlertState.CONFIRMED.value: ":red_circle:", AlertState.FIXED.value: ":white_check_mark:",
    AlertState.ACKED.value: ":eyes:", AlertState.EXPECTED.value: ":ballot_box_with_check:",
    AlertState.FALSE_POSITIVE.value: ":no_entry_sign:", AlertState.WONTFIX.value: ":zzz:",
    EventKind.WORSENED.value: ":arrow_double_up:", AlertState.NEW.value: ":hourglass:",
}


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _section(text: str) -> dict[str, Any]:
    if len(text) > MAX_SECTION_CHARS:
        text = text[: MAX_SECTION_CHARS - 3] + "..."
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _pct(value: float | None) -> str:
    return cells.fmt_change(value)


def _change(alert: Alert, value: float | None) -> str:
    """The change as the report words it: a derived campaign series in scaling words (``efficiency at
    P=2 fell 12.0%``, zlops.campaign.scaling.phrase), any other series as a signed percentage."""
    return scaling.phrase(alert.case, alert.metric, value) or _pct(value)


def series_line(alert: Alert, step: Step | None) -> str:
    """``#12 `softmax_8192` (time): +6.00%  4 ms → 4.24 ms``: the alert's reference against tonight."""
    name = f"#{alert.id} `{_esc(alert.case)}` ({_esc(alert.metric)})"
    if step is None:
        return f"{name}: *{_change(alert, alert.last_change_pct)}*"
    base = cells.format_value(alert.base_value, alert.unit)
    head = cells.fmt_value(step.comparison.head_value, step.comparison.unit)
    return f"{name}: *{_change(alert, step.change_pct)}*  {base} → {head}"


def announcement(members: Sequence[tuple[Alert, Step]], *, channel: str, suite: str, run_key: str) -> dict[str, Any]:
    """The first message of a regression's thread: every alert of one cluster, worst first."""
    members = sorted(members, key=lambda m: (-(m[1].worse_pct or 0.0), m[0].case, m[0].metric))
    first = members[0][0]
    worse = sorted(abs(m[1].worse_pct or 0.0) for m in members)
    spread = f"{worse[0]:.1f}%" if f"{worse[0]:.1f}" == f"{worse[-1]:.1f}" else f"{worse[0]:.1f}–{worse[-1]:.1f}%"
    why = sorted({_esc(m[1].note) for m in members if m[1].note})
    lines = [f"• {series_line(a, s)}" for a, s in members[:MAX_LINES]]
    if len(members) > MAX_LINES:
        lines.append(f"… and {len(members) - MAX_LINES} more (see the night's summary thread and report)")
    ids = [a.id for a, _ in members]
    head = (f":red_circle: *New regression* · *{_esc(first.pool)}* · `{_esc(first.family)}` · "
            f"`{first.commit_range}`\n{len(members)} series of {_esc(suite)} worse by {spread}"
            + (f" ({'; '.join(why)})" if why else ""))
    return {
        "channel": channel,
        "text": (f"New regression in {suite}: {first.family} on {first.pool} ({first.commit_range}), "
                 f"{len(members)} series worse by {spread}"),
        "blocks": [
            _section(head),
            _section("\n".join(lines)),
            {"type": "context", "elements": [{"type": "mrkdwn", "text": (
                f"Alerts {', '.join(f'#{i}' for i in ids[:10])}{' …' if len(ids) > 10 else ''} · run "
                f"`{_esc(run_key)}` · this thread follows them until fixed · "
                f"`zlops alert ack {ids[0]} --note '...'` (or expected, false-positive, wontfix)")}]},
        ],
    }


def event_line(alert: Alert, kind: str, to_state: str, *, change_pct: float | None, note: str = "",
               actor: str | None = None, head_sha: str | None = None, figures: Figures | None = None) -> str:
    """One state change as a line: emoji, what happened, the series, the verdict's figures, and why (mrkdwn).

    The change is the judged night's own figure; with ``figures`` the line names the two values it
    was computed from, so it reads exactly as the report's row of that night.
    """
    what = "worse again" if kind == EventKind.WORSENED.value else to_state.replace("_", " ")
    emoji = EMOJI.get(kind if kind == EventKind.WORSENED.value else to_state, ":information_source:")
    by = f" by {_esc(actor)}" if actor else ""
    at = f" at `{head_sha[:7]}`" if head_sha else ""
    detail = ""
    if figures is not None:
        unit = figures.unit or alert.unit
        detail = (f" ({cells.format_value(figures.reference, unit)} → {cells.format_value(figures.value, unit)}, "
                  f"vs {_esc(figures.reference_label)})")
    text = (f"{emoji} *{what}*{by}: #{alert.id} `{_esc(alert.case)}` ({_esc(alert.pool)}, {_esc(alert.metric)}) "
            f"{_change(alert, change_pct)}{detail}{at}")
    return text + (f" — {_esc(note)}" if note else "")


def thread_update(entries: Sequence[tuple[Alert, Step]], *, channel: str, head_sha: str) -> dict[str, Any]:
    """One reply carrying the night's changes of the alerts of one thread."""
    lines = [event_line(a, s.event.value if s.event else "state", s.to_state.value, change_pct=s.change_pct,
                        note=s.note, head_sha=head_sha, figures=s.comparison.figures) for a, s in entries]
    blocks = [_section("\n".join(lines[i:i + 10])) for i in range(0, len(lines), 10)][:49]
    states = sorted({s.to_state.value if s.event is not EventKind.WORSENED else "worse again" for _, s in entries})
    return {"channel": channel, "text": f"{len(entries)} alert update(s): {', '.join(states)}", "blocks": blocks}


def kernels_reply(entries: Sequence[tuple[Alert, str]], *, channel: str) -> dict[str, Any]:
    """The thread reply that says, per alert of a new regression, whether its op's compiled kernels
    changed (the line :func:`zlops.kernels.attribution.Attribution.text` builds, printed as is)."""
    lines = [f":mag: #{a.id} `{_esc(a.case)}`: {_esc(text)}" for a, text in entries]
    blocks = [_section("\n".join(lines[i:i + 10])) for i in range(0, len(lines), 10)][:49]
    return {"channel": channel, "text": f"compiled kernels of {len(entries)} alert(s)", "blocks": blocks}


def human_update(before: Alert, after: Alert, *, note: str, actor: str, channel: str) -> dict[str, Any]:
    """The reply for a person's change (``zlops alert ack ...``)."""
    line = event_line(after, EventKind.STATE.value, after.state.value, change_pct=after.last_change_pct,
                      note=note, actor=actor)
    return {"channel": channel, "text": f"#{after.id} {before.state.value} -> {after.state.value} by {actor}",
            "blocks": [_section(line)]}


def digest_line(alert: Alert, event: dict[str, Any]) -> str:
    """How the summary names one of tonight's changes (mrkdwn)."""
    kind, to_state = event["kind"], event["to_state"]
    if kind == EventKind.OPENED.value:
        label = "new regression (thread opened)" if to_state == AlertState.CONFIRMED.value else \
            "watching (not confirmed, not announced)"
        return (f"{EMOJI.get(to_state, '')} #{alert.id} `{_esc(alert.case)}` ({_esc(alert.pool)}, "
                f"{_esc(alert.metric)}) {_change(alert, event['change_pct'])}: {label}")
    return event_line(alert, kind, to_state, change_pct=event["change_pct"], note=event.get("note") or "")
