"""What a bisection says (pure): the reply in an alert's Slack thread and the lines of ``zlops alert show``.

Every number printed is a step's stored :class:`zlops.model.Figures` (reference, value, the change
computed from those two, its CI, the runs) or a count of stored steps; nothing is recomputed here.
Alerts whose bisections found the same culprit are named in one message.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from zlops.bisect.search import Bisection, CaseEvidence, State, StepKind, StepRecord
from zlops.report import cells

if TYPE_CHECKING:
    from zlops.store import Store

_EMOJI = {State.FOUND: ":mag:", State.UNVERIFIED: ":grey_question:", State.AMBIGUOUS: ":grey_question:",
          State.NOT_REPRODUCED: ":leftwards_arrow_with_hook:", State.FAILED: ":warning:"}
MAX_SECTION_CHARS = 3000


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _unit(b: Bisection, e: CaseEvidence) -> str:
    return next((t.unit for t in b.targets if t.key == (e.case, e.metric)), "") or e.figures.unit


def _ci_text(e: CaseEvidence) -> str:
    """What the step was judged by: ``shift +29.8% (CI +29.1%..+31.0%`` or the median ratio's ``CI ...``."""
    f = e.figures
    ci = f"CI {f.ci_pct[0]:+.1f}%..{f.ci_pct[1]:+.1f}%" if f.ci_pct else "no CI at these runs"
    if e.shift_pct is None:
        return ci
    return f"shift {cells.fmt_change(e.shift_pct)}, {ci}"


def evidence_line(b: Bisection, e: CaseEvidence) -> str:
    """``softmax_8192 (time): 1.00 ms → 1.30 ms, +30.00% (shift +29.80%, CI +29.1%..+31.0%, line 15.0%,
    8+8 runs): bad``: the medians of the runs and their change, then the statistic the step was judged
    by (the Hodges-Lehmann shift of the runs and its CI, or the median ratio's CI) against the line."""
    f, unit = e.figures, _unit(b, e)
    runs = f"{len(f.runs_base)}+{len(f.runs_head)} runs"
    return (f"{e.case} ({e.metric}): {cells.format_value(f.reference, unit)} → {cells.format_value(f.value, unit)}, "
            f"{cells.fmt_change(f.change_pct)} ({_ci_text(e)}, line {e.line_pct:.1f}%, {runs}): "
            f"{e.outcome.value if e.outcome else 'undecided'}")


def cost_line(b: Bisection, steps: Sequence[StepRecord]) -> str:
    middle = sum(1 for s in steps if s.kind is StepKind.STEP)
    skipped = sum(1 for s in steps if s.kind is StepKind.STEP and s.outcome.value in ("skipped", "unclear"))
    retests = sum(1 for s in steps if s.kind is StepKind.RETEST)
    builds, seconds = sum(s.builds for s in steps), sum(s.seconds for s in steps)
    again = f", {retests} retested" if retests else ""
    return (f"{middle} step(s) over {b.n} commit(s) ({skipped} skipped{again}), {builds} build(s), "
            f"{seconds:.0f} s of device time on {b.pool}/{b.device}")


def step_lines(b: Bisection, steps: Sequence[StepRecord]) -> list[str]:
    """One line per stored step, in order: kind, commits, outcome, pairs, cost, the cases' figures."""
    out = []
    for s in steps:
        what = f"{s.kind.value:<9} {s.base_sha[:7]}..{s.sha[:7]} (#{s.position}/{b.n})"
        cost = f"{s.pairs} pairs, {s.seconds:.0f} s, {s.builds} build(s)"
        out.append(f"{what}: {s.outcome.value} [{cost}]" + (f" {s.note}" if s.note else ""))
        out += [f"    {evidence_line(b, e)}" for e in s.evidence]
    return out


def headline(b: Bisection) -> str:
    """What the bisection concluded, in one line (plain text)."""
    if b.state in (State.FOUND, State.UNVERIFIED) and b.culprit_sha:
        verdict = "culprit" if b.state is State.FOUND else "culprit (NOT verified against its parent)"
        return (f"bisection #{b.id} {b.state.value}: {verdict} {b.culprit_sha[:12]} \"{b.culprit_subject or ''}\" "
                f"by {b.culprit_author or '?'}")
    if b.state is State.AMBIGUOUS:
        return (f"bisection #{b.id} ambiguous: the culprit is one of {', '.join(c[:7] for c in b.candidates)} "
                f"({b.reason})")
    return f"bisection #{b.id} {b.state.value}" + (f": {b.reason}" if b.reason else "")


def show_lines(b: Bisection, steps: Sequence[StepRecord]) -> list[str]:
    """The lines ``zlops alert show`` prints for an alert's bisection."""
    lines = [headline(b), f"  range {b.good_sha[:7]}..{b.bad_sha[:7]} (first-parent, {b.n} commits); "
             f"{cost_line(b, steps)}"]
    if len(b.alert_ids) > 1:
        lines.append(f"  alerts of this bisection: {', '.join(f'#{i}' for i in b.alert_ids)}")
    lines += [f"  {line}" for line in step_lines(b, steps)]
    return lines


def _section(text: str) -> dict[str, Any]:
    if len(text) > MAX_SECTION_CHARS:
        text = text[: MAX_SECTION_CHARS - 3] + "..."
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def reply(group: Sequence[tuple[Bisection, Sequence[StepRecord]]], *, channel: str) -> dict[str, Any]:
    """The thread reply of a bisection, or of every bisection that found the same culprit (one message).

    ``group[0]`` says the conclusion; a found culprit lists, per bisection, the verify A/B of each
    case (the culprit against its parent) and what the search cost.
    """
    first, _ = group[0]
    emoji = _EMOJI.get(first.state, ":information_source:")
    alerts = sorted({i for b, _ in group for i in b.alert_ids})
    if first.state in (State.FOUND, State.UNVERIFIED) and first.culprit_sha:
        claim = "Culprit" if first.state is State.FOUND else "Likely culprit (its own A/B did not reproduce the change)"
        head = (f"{emoji} *{claim}*: `{first.culprit_sha[:12]}` {_esc(first.culprit_subject or '')} — "
                f"{_esc(first.culprit_author or '?')}")
        text = (f"{claim} of alerts {', '.join(f'#{i}' for i in alerts)}: {first.culprit_sha[:12]} "
                f"{first.culprit_subject or ''}")
    else:
        head = f"{emoji} *Bisection*: {_esc(headline(first))}"
        text = headline(first)
    blocks = [_section(head)]
    for b, steps in group:
        verify = next((s for s in reversed(steps) if s.kind is StepKind.VERIFY), None)
        lines = [f"*{_esc(b.pool)}/{b.device}* · alerts {', '.join(f'#{i}' for i in b.alert_ids)} · "
                 f"`{b.good_sha[:7]}..{b.bad_sha[:7]}` · {_esc(cost_line(b, steps))}"]
        if verify is not None:
            lines.append(f"parent `{verify.base_sha[:7]}` vs `{verify.sha[:7]}`:")
            lines += [f"• {_esc(evidence_line(b, e))}" for e in verify.evidence]
        elif b.state is State.NOT_REPRODUCED:
            rep = next((s for s in steps if s.kind is StepKind.REPRODUCE), None)
            lines += [f"• {_esc(evidence_line(b, e))}" for e in (rep.evidence if rep else ())]
        blocks.append(_section("\n".join(lines)))
    ids = alerts[0] if alerts else "ID"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": (
        f"every step: `zlops alert show {ids}` · zlops bisection, same-device interleaved A/B of the regressed cases")}]})
    return {"channel": channel, "text": text, "blocks": blocks[:49]}


# --- the alert page's culprit block ----------------------------------------------------------------

def culprit_block(b: Bisection, steps: Sequence[StepRecord], *, alert_id: int | None = None) -> str:
    """The culprit block of an alert's page (an HTML fragment, every value escaped; pure).

    The conclusion (:func:`headline`: state, the culprit's sha, subject and author, or the
    candidates), the range and what the search cost (:func:`cost_line`), the A/B that settled it
    (the verify step: the culprit against its parent; for ``not_reproduced`` the ends'), one row per
    case with the stored figures (medians of the runs, their change, the statistic's estimate and CI,
    the line, the runs), then every step. Nothing is recomputed: the rows are the stored
    :class:`zlops.model.Figures` and step records, formatted as ``zlops alert show`` formats them.
    """
    e = html.escape
    found = b.state in (State.FOUND, State.UNVERIFIED) and b.culprit_sha
    head = [f"<section class='culprit' id='bisection-{b.id}'>",
            f"<h2>Bisection #{b.id}: {e(b.state.value.replace('_', ' '))}</h2>"]
    if found:
        claim = "Culprit" if b.state is State.FOUND else "Likely culprit (its own A/B did not reproduce the change)"
        head.append(f"<p><b>{e(claim)}</b>: <code>{e(b.culprit_sha or '')}</code> {e(b.culprit_subject or '')} "
                    f"— {e(b.culprit_author or '?')}</p>")
    else:
        head.append(f"<p>{e(headline(b))}</p>")
    others = [i for i in b.alert_ids if i != alert_id]
    head.append(f"<p>range <code>{e(b.good_sha[:12])}..{e(b.bad_sha[:12])}</code> (first-parent, {b.n} commits); "
                f"{e(cost_line(b, steps))}"
                + (f"; also the culprit search of alerts {e(', '.join(f'#{i}' for i in others))}" if others else "")
                + "</p>")
    settled = next((s for s in reversed(steps) if s.kind is StepKind.VERIFY), None)
    if settled is None and b.state is State.NOT_REPRODUCED:
        settled = next((s for s in steps if s.kind is StepKind.REPRODUCE), None)
    if settled is not None and settled.evidence:
        title = ("the culprit against its parent" if settled.kind is StepKind.VERIFY else "the range's ends")
        head.append(f"<h3>{e(title)}: <code>{e(settled.base_sha[:7])}</code> vs <code>{e(settled.sha[:7])}</code>"
                    f" ({settled.pairs} pairs)</h3>")
        head.append(_evidence_table(b, settled.evidence))
    rows = []
    for s in steps:
        rows.append(f"<tr><td>{e(s.kind.value)}</td><td><code>{e(s.base_sha[:7])}..{e(s.sha[:7])}</code></td>"
                    f"<td>#{s.position}/{b.n}</td><td>{e(s.outcome.value)}</td><td>{s.pairs}</td>"
                    f"<td>{s.seconds:.0f} s</td><td>{s.builds}</td><td>{e(s.note)}</td></tr>")
    head.append("<h3>Steps</h3><table><tr><th>kind</th><th>commits</th><th>position</th><th>outcome</th>"
                "<th>pairs</th><th>device time</th><th>builds</th><th>note</th></tr>" + "".join(rows) + "</table>")
    head.append(f"<p>every step with its figures: <code>zlops alert show {alert_id if alert_id else b.alert_ids[0]}"
                "</code></p></section>")
    return "".join(head)


def _evidence_table(b: Bisection, evidence: Sequence[CaseEvidence]) -> str:
    e = html.escape
    rows = []
    for ev in evidence:
        f, unit = ev.figures, _unit(b, ev)
        rows.append(f"<tr><td>{e(ev.case)}</td><td>{e(ev.metric)}</td>"
                    f"<td>{e(cells.format_value(f.reference, unit))}</td>"
                    f"<td>{e(cells.format_value(f.value, unit))}</td><td>{e(cells.fmt_change(f.change_pct))}</td>"
                    f"<td>{e(_ci_text(ev))}</td><td>{ev.line_pct:.1f}%</td>"
                    f"<td>{len(f.runs_base)}+{len(f.runs_head)}</td>"
                    f"<td>{e(ev.outcome.value if ev.outcome else 'undecided')}</td></tr>")
    return ("<table><tr><th>case</th><th>metric</th><th>reference (median of runs)</th><th>value (median of runs)</th>"
            "<th>change</th><th>judged by</th><th>line</th><th>runs</th><th>outcome</th></tr>"
            + "".join(rows) + "</table>")


def alert_culprit_block(store: Store, alert_id: int) -> str:
    """The culprit block of alert ``alert_id``'s page from the store (:func:`culprit_block`); "" when
    no bisection covers the alert. For the alert page (zlops.airflow.ui): it only reads the store."""
    b = store.bisection_of_alert(alert_id)
    if b is None:
        return ""
    return culprit_block(b, store.bisection_steps(b.id), alert_id=alert_id)
