"""The night's Slack summary as pure data: one channel message, and the thread replies that hold the rest.

Rendered by :func:`slack_summary_messages` from values only (no client, no I/O); sending is
:mod:`zlops.slack.outbox`'s job. Series are grouped by (commit range x op family x pool), every line of
a group links to its figure, and nothing is truncated silently: what does not fit Slack's limits
(50 blocks, 3000 characters per section) goes into the thread, and the caller attaches the full report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from zlops.alerts.lifecycle import op_family, series_ranges
from zlops.campaign import scaling
from zlops.model import CompareSummary, Comparison, RunRecord, ShardOutcome, ShardStatus, Verdict, class_bounds
from zlops.report import cells
from zlops.report.table import caliber_lines

#: Slack's limits: 50 blocks per message, 3000 characters per section text, 150 per header.
MAX_BLOCKS = 50
MAX_SECTION_CHARS = 3000
MAX_HEADER_CHARS = 150
#: Series shown per group in the channel message; every series of a larger group goes to the thread.
SERIES_PER_GROUP = 3
MAX_LINE_CHARS = 300


@dataclass(frozen=True)
class AlertDigest:
    """What the alert lifecycle did tonight, for the summary (pure data; see :mod:`zlops.slack.announce`).

    ``marks`` tags series lines (``new``, ``confirmed``, ``fixed``, ``acked`` ...); ``lines`` are the
    state changes in mrkdwn; ``counts`` how many alerts moved to each state tonight; ``still_open``
    how many stay open without being announced again.
    """

    marks: Mapping[tuple[str, str, str], str] = field(default_factory=dict)
    lines: Sequence[str] = ()
    counts: Mapping[str, int] = field(default_factory=dict)
    still_open: int = 0
    #: per series, the commit range of its alert where the change was first seen (zlops.alerts.lifecycle.series_ranges)
    ranges: Mapping[tuple[str, str, str], str] = field(default_factory=dict)


@dataclass(frozen=True)
class SummaryMessages:
    """The night's summary: one channel message, and the thread replies that hold what did not fit."""

    main: dict[str, Any]
    thread: tuple[dict[str, Any], ...]

    @property
    def overflowed(self) -> bool:
        """True when part of the summary is in the thread (the full report is then attached there)."""
        return bool(self.thread)


def slack_summary_payload(
    summary: CompareSummary,
    *,
    run: RunRecord,
    shards: Sequence[ShardOutcome],
    channel: str,
    report_path: str | None = None,
    thresholds: tuple[float, float] = (2.0, 5.0),
    judge: str = "simple",
    figures: Mapping[tuple[str, str, str], str] | None = None,
    alerts: AlertDigest | None = None,
    expected_pools: Sequence[str] | None = None,
    previous_sha: str | None = None,
    coverage: str | None = None,
) -> dict[str, Any]:
    """The channel message of :func:`slack_summary_messages` (pure)."""
    return slack_summary_messages(summary, run=run, shards=shards, channel=channel, report_path=report_path,
                                  thresholds=thresholds, judge=judge, figures=figures, alerts=alerts,
                                  expected_pools=expected_pools, previous_sha=previous_sha, coverage=coverage).main


def slack_summary_messages(
    summary: CompareSummary,
    *,
    run: RunRecord,
    shards: Sequence[ShardOutcome],
    channel: str,
    report_path: str | None = None,
    thresholds: tuple[float, float] = (2.0, 5.0),
    judge: str = "simple",
    figures: Mapping[tuple[str, str, str], str] | None = None,
    alerts: AlertDigest | None = None,
    expected_pools: Sequence[str] | None = None,
    previous_sha: str | None = None,
    coverage: str | None = None,
) -> SummaryMessages:
    """Render one run's Slack summary (pure): ``chat.postMessage`` arguments for the channel and thread.

    Order: header (suite, commit range), pools run/invalid/missing and shards, counts, alert changes,
    then severe, regressions, potential, suspects, improvements, failures, missing and coverage gaps.
    Series are grouped by (commit range x op family x pool) (:func:`zlops.alerts.lifecycle.op_family`); each
    group shows its worst ``SERIES_PER_GROUP`` series, each linking to its figure (``figures``: a
    Slack permalink, else the artifact path). Nothing is dropped: every series of a group with more
    goes into the thread, and so do blocks past Slack's 50-block limit (the caller attaches the
    full report there too, see :attr:`SummaryMessages.overflowed`).

    A series' commit range is :func:`zlops.alerts.lifecycle.series_ranges`' (its alert's where the change was first
    seen, else its baseline's commit, or ``previous_sha`` when that is tonight's own); the classes are
    named by :func:`zlops.model.class_bounds` of ``judge`` and ``thresholds``. ``coverage`` is the night's
    coverage line (:func:`zlops.judge.coverage.night_line`: the share watched at both thresholds, why the others
    are not, and a pool's fall), said under the counts.
    """
    potential_pct, regression_pct = thresholds
    bounds = class_bounds(judge, potential_pct, regression_pct)
    figures = figures or {}
    alerts = alerts or AlertDigest()
    head = cells.short_sha(run.sha)
    bad = [s for s in shards if s.status is not ShardStatus.OK]
    counts = {v: summary.count(v) for v in Verdict}
    ran, invalid, missing_pools = cells.pool_status(shards, summary.comparisons, expected_pools)

    base = cells.baseline_label(summary.comparisons)
    span = f"{base}..{head}" if base not in ("none", "several baselines") else f"{base} -> {head}"
    header = _truncate(f"{summary.suite} {run.kind} · {span}", MAX_HEADER_CHARS)
    shard_text = f"{len(shards) - len(bad)} ok, {len(bad)} failed" if shards else "none"
    pools_text = (f"pools: {len(ran)} run" + _names(", {n} invalid", invalid) + _names(", {n} missing", missing_pools))
    top: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": header}},
        _section(f"Run `{_esc(run.run_key)}` on `{_esc(run.branch)}` · {pools_text} · shards: {shard_text}"),
        _section(
            f"*{summary.overall_line()}*\n"
            + (f":rotating_light: {counts[Verdict.SEVERE]} severe ({bounds[Verdict.SEVERE]}) · "
               if counts[Verdict.SEVERE] else "")
            + f":red_circle: {counts[Verdict.REGRESSION]} regressions ({bounds[Verdict.REGRESSION]}) · "
            + (f":large_orange_circle: {counts[Verdict.POTENTIAL]} potential ({bounds[Verdict.POTENTIAL]}) · "
               if judge != "noise" or counts[Verdict.POTENTIAL] else "")
            + f":large_green_circle: {counts[Verdict.IMPROVED]} improved · "
            f"{counts[Verdict.UNCHANGED]} unchanged · {counts[Verdict.NEW]} new · "
            f"{counts[Verdict.MISSING]} missing"
            + (f" · {counts[Verdict.SUSPECT]} suspect (unconfirmed)" if counts[Verdict.SUSPECT] else "")
            + (f" · {counts[Verdict.SUSPECT_IMPROVED]} suspect improvement (unconfirmed)"
               if counts[Verdict.SUSPECT_IMPROVED] else "")
            + (f"\n:telescope: {_esc(coverage)}" if coverage else "")
        ),
    ]
    caliber = caliber_lines(summary.comparisons)
    if caliber:   # a caliber break (or an allowed mismatch) is said before any delta, as in the report
        top += _list_blocks(":warning: *Caliber*", [_esc(line) for line in caliber])
    if alerts.lines or alerts.counts or alerts.still_open:
        moved = ", ".join(f"{n} {state}" for state, n in sorted(alerts.counts.items()) if n)
        title = (f":bell: *Alerts*: {moved or 'no changes'} · {alerts.still_open} still open "
                 f"(not announced again; `zlops alert list`)")
        top += _list_blocks(title, list(alerts.lines))

    by = _by_verdict(summary.comparisons)
    ranges = series_ranges(summary.comparisons, run.sha, previous_sha=previous_sha, alerts=alerts.ranges)
    titles = class_bounds(judge, potential_pct, regression_pct, long=True)
    grouped = [
        (f":rotating_light: *Severe regressions* ({titles[Verdict.SEVERE]})", by[Verdict.SEVERE], "worse"),
        (f":red_circle: *Regressions* ({titles[Verdict.REGRESSION]})", by[Verdict.REGRESSION], "worse"),
        (f":large_orange_circle: *Potential regressions* ({titles[Verdict.POTENTIAL]})", by[Verdict.POTENTIAL],
         "worse"),
        (":hourglass: *Suspects* (beyond the threshold tonight, awaiting confirmation; nobody is alerted)",
         by[Verdict.SUSPECT], "worse"),
        (":hourglass: *Suspect improvements* (better beyond the threshold, awaiting confirmation like a regression)",
         by[Verdict.SUSPECT_IMPROVED], "better"),
        (":large_green_circle: *Improvements*", by[Verdict.IMPROVED], "better"),
    ]
    body: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    for title, rows, word in grouped:
        if not rows:
            continue
        shown, hidden = _group_lines(rows, ranges, word, figures, alerts.marks)
        body += _list_blocks(title, shown)
        if hidden:
            details += _list_blocks(f"{title} — every series", hidden)
    failures = [_shard_line(s) for s in sorted(bad, key=lambda s: (s.pool, s.device))]
    failures += _count_lines(by[Verdict.FAILED], ranges, "failed tonight")
    if failures:
        body += _list_blocks(":x: *Failures*", failures)
    partial = [_shard_line(s) for s in sorted(shards, key=lambda s: (s.pool, s.device))
               if s.status is ShardStatus.OK and (s.error or "").strip()]
    if partial:   # ok shards with a note: the benchmark exited with one of the suite's partial_exit_codes
        body += _list_blocks(":warning: *Partial shards* (results kept; cases not written read missing)", partial)
    if by[Verdict.MISSING]:
        body += _list_blocks(":grey_question: *Missing tonight* (in the baseline, no value tonight)",
                             _count_lines(by[Verdict.MISSING], ranges, "missing"))
    gaps = sorted(by[Verdict.INVALID] + by[Verdict.UNMEASURABLE] + by[Verdict.INCOMPARABLE],
                  key=lambda c: (c.pool, c.verdict.value, c.case, c.metric))
    if gaps:
        body += _list_blocks(":warning: *Coverage gaps* (not judged: caliber change, throttling, or noise hides "
                             "the target change)", _gap_lines(gaps))

    footer_text = f"Full report: {_esc(report_path)}" if report_path else ""
    room = MAX_BLOCKS - len(top) - 1  # one block kept for the footer
    overflow = body[room:] if len(body) > room else []
    body = body[:room]
    thread_blocks = overflow + details
    if thread_blocks:
        what = [f"{len(overflow)} more sections"] if overflow else []
        what += ["every series of the larger groups"] if details else []
        footer_text = (footer_text + " · " if footer_text else "") + (
            f"continued in the thread: {' and '.join(what)}; the full report is attached there")
    main_blocks = top + body
    if footer_text:
        main_blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": _truncate(footer_text, MAX_SECTION_CHARS)}]})

    text = f"{summary.suite} @ {head}: {summary.counts_text()}; shards {shard_text}"
    chunks = [thread_blocks[i:i + MAX_BLOCKS - 1] for i in range(0, len(thread_blocks), MAX_BLOCKS - 1)]
    thread = tuple(
        {"channel": channel, "text": f"{summary.suite} @ {head}: summary continued ({n}/{len(chunks)})",
         "blocks": [*chunk, {"type": "context", "elements": [
             {"type": "mrkdwn", "text": f"summary continued, part {n} of {len(chunks)}"}]}]}
        for n, chunk in enumerate(chunks, start=1))
    return SummaryMessages({"channel": channel, "text": text, "blocks": main_blocks}, thread)


def _names(fmt: str, pools: Sequence[str]) -> str:
    if not pools:
        return fmt.format(n=0)
    shown = ", ".join(_esc(p) for p in pools[:5]) + (f", +{len(pools) - 5}" if len(pools) > 5 else "")
    return fmt.format(n=len(pools)) + f" ({shown})"


def _by_verdict(comparisons: Sequence[Comparison]) -> dict[Verdict, list[Comparison]]:
    out: dict[Verdict, list[Comparison]] = {v: [] for v in Verdict}
    for c in cells.sorted_comparisons(comparisons):
        out[c.verdict].append(c)
    return out


def _worse(c: Comparison) -> float:
    return c.judgement.worse_pct if c.judgement.worse_pct is not None else 0.0


def _group_key(c: Comparison, ranges: Mapping[tuple[str, str, str], str]) -> tuple[str, str, str]:
    return (ranges[(c.pool, c.case, c.metric)], op_family(c.case), c.pool)


def _grouped(rows: Sequence[Comparison], ranges: Mapping[tuple[str, str, str], str],
             word: str) -> list[tuple[tuple[str, str, str], list[Comparison]]]:
    """Groups, largest change first; within a group the largest change first."""
    sign = 1.0 if word == "worse" else -1.0
    groups: dict[tuple[str, str, str], list[Comparison]] = {}
    for c in rows:
        groups.setdefault(_group_key(c, ranges), []).append(c)
    for members in groups.values():
        members.sort(key=lambda c: (-sign * _worse(c), c.case, c.metric))
    return sorted(groups.items(), key=lambda kv: (-sign * _worse(kv[1][0]), kv[0][2], kv[0][1], kv[0][0]))


def _group_lines(rows: Sequence[Comparison], ranges: Mapping[tuple[str, str, str], str], word: str,
                 figures: Mapping[tuple[str, str, str], str],
                 marks: Mapping[tuple[str, str, str], str]) -> tuple[list[str], list[str]]:
    """(lines for the channel message, every line of the groups that had more than fit there)."""
    shown: list[str] = []
    hidden: list[str] = []
    for (span, family, pool), members in _grouped(rows, ranges, word):
        amounts = sorted(abs(_worse(c)) for c in members)
        spread = (f"{amounts[0]:.1f}%" if len(amounts) == 1 or f"{amounts[0]:.1f}" == f"{amounts[-1]:.1f}"
                  else f"{amounts[0]:.1f}–{amounts[-1]:.1f}%")
        tags = sorted({marks[k] for k in ((c.pool, c.case, c.metric) for c in members) if k in marks})
        tag = f" · alerts: {', '.join(tags)}" if tags else ""
        head = _truncate(f"• *{_esc(pool)}* · `{_esc(family)}` · `{span}`: {len(members)} series {word} by "
                         f"{spread}{tag}", MAX_LINE_CHARS)
        lines = [_series_line(c, figures, marks) for c in members]
        shown.append(head)
        shown += lines[:SERIES_PER_GROUP]
        if len(lines) > SERIES_PER_GROUP:
            shown.append(f"      … and {len(lines) - SERIES_PER_GROUP} more in the thread")
            hidden += [head, *lines]
    return shown, hidden


def _series_line(c: Comparison, figures: Mapping[tuple[str, str, str], str],
                 marks: Mapping[tuple[str, str, str], str]) -> str:
    key = (c.pool, c.case, c.metric)
    base = cells.fmt_value(c.base_value, cells.base_unit(c))
    head = cells.fmt_value(c.head_value, c.unit)
    change = cells.fmt_change(cells.change_pct(c))
    mark = f" · alert {marks[key]}" if key in marks else ""
    link = figures.get(key)
    fig = ""
    if link:
        fig = f" · <{link}|figure>" if link.startswith(("https://", "http://")) else f" · figure `{_esc(link)}`"
    text = f"    ◦ `{_esc(c.case)}` ({_esc(c.metric)}): *{change}*  {base} → {head}{mark}"
    words = scaling.describe(c)  # a campaign's derived series says what moved: "efficiency at P=2 fell 12%"
    if words is not None:
        text = f"    ◦ `{_esc(c.case)}`: *{_esc(words)}*{mark}"
    # the link must survive: shorten the text before it, never the link itself
    return _truncate(text, max(60, MAX_LINE_CHARS - len(fig))) + fig


def _count_lines(rows: Sequence[Comparison], ranges: Mapping[tuple[str, str, str], str], what: str) -> list[str]:
    """Series that have no change to show (failed, missing), grouped: a count and the first names."""
    out = []
    for (_span, family, pool), members in sorted(
            ((k, v) for k, v in _grouped(rows, ranges, "worse")), key=lambda kv: (kv[0][2], kv[0][1])):
        names = ", ".join(f"`{_esc(c.case)}` ({_esc(c.metric)})" for c in members[:3])
        more = f" and {len(members) - 3} more (see the report)" if len(members) > 3 else ""
        out.append(_truncate(f"• *{_esc(pool)}* · `{_esc(family)}`: {len(members)} {what}: {names}{more}",
                             MAX_LINE_CHARS))
    return out


def _gap_lines(rows: Sequence[Comparison]) -> list[str]:
    groups: dict[tuple[str, str], list[Comparison]] = {}
    for c in rows:
        groups.setdefault((c.pool, c.verdict.value), []).append(c)
    out = []
    for (pool, verdict), members in sorted(groups.items()):
        first = members[0]
        note = _esc(first.judgement.note.strip().splitlines()[0][:160]) if first.judgement.note.strip() else ""
        more = f" and {len(members) - 1} more (see the report)" if len(members) > 1 else ""
        out.append(_truncate(f"• *{_esc(pool)}*: {len(members)} {verdict}: `{_esc(first.case)}` "
                             f"({_esc(first.metric)}){': ' + note if note else ''}{more}", MAX_LINE_CHARS))
    return out


def _shard_line(s: ShardOutcome) -> str:
    error = (s.error or "").strip().splitlines()[0] if (s.error or "").strip() else ""
    line = f"• {_esc(s.pool)} device {s.device} ({_esc(s.backend)}): {s.status.value}"
    return _truncate(f"{line}: {_esc(error)}" if error else line, MAX_LINE_CHARS)


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": _truncate(text, MAX_SECTION_CHARS)}}


def _list_blocks(title: str, lines: Sequence[str]) -> list[dict[str, Any]]:
    """A title and every line, in as many sections as Slack's 3000-character limit needs (never dropped)."""
    blocks: list[dict[str, Any]] = []
    text = title
    for line in lines:
        if len(text) + 1 + len(line) > MAX_SECTION_CHARS:
            blocks.append(_section(text))
            text = f"{title} (continued)"
        text += "\n" + line
    blocks.append(_section(text))
    return blocks


def _esc(text: str) -> str:
    """Escape the three characters Slack's mrkdwn reserves."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
