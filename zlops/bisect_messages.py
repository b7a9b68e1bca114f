"""What a bisection says (pure): the reply in an alert's Slack thread and the lines of ``zlops alert show``.

Every number printed is a step's stored :class:`zlops.model.Figures` (reference, value, the change
computed from those two, its CI, the runs) or a count of stored steps; nothing is recomputed here.
Alerts whose bisections found the same culprit are named in one message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zlops.bisect import Bisection, CaseEvidence, State, StepKind, StepRecord
from zlops.report import cells

_EMOJI = {State.FOUND: ":mag:", State.UNVERIFIED: ":grey_question:", State.AMBIGUOUS: ":grey_question:",
          State.NOT_REPRODUCED: ":leftwards_arrow_with_hook:", State.FAILED: ":warning:"}
MAX_SECTION_CHARS = 3000


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _unit(b: Bisection, e: CaseEvidence) -> str:
    return next((t.unit for t in b.targets if t.key == (e.case, e.metric)), "") or e.figures.unit


def evidence_line(b: Bisection, e: CaseEvidence) -> str:
    """``softmax_8192 (time): 1.00 ms → 1.30 ms, +30.00% (CI +29.1%..+31.0%, line 15.0%, 8+8 runs): bad``."""
    f, unit = e.figures, _unit(b, e)
    ci = f" (CI {f.ci_pct[0]:+.1f}%..{f.ci_pct[1]:+.1f}%" if f.ci_pct else " ("
    runs = f"{len(f.runs_base)}+{len(f.runs_head)} runs"
    return (f"{e.case} ({e.metric}): {cells.format_value(f.reference, unit)} → {cells.format_value(f.value, unit)}, "
            f"{cells.fmt_change(f.change_pct)}{ci}, line {e.line_pct:.1f}%, {runs}): "
            f"{e.outcome.value if e.outcome else 'undecided'}")


def cost_line(b: Bisection, steps: Sequence[StepRecord]) -> str:
    middle = sum(1 for s in steps if s.kind is StepKind.STEP)
    skipped = sum(1 for s in steps if s.kind is StepKind.STEP and s.outcome.value in ("skipped", "unclear"))
    builds, seconds = sum(s.builds for s in steps), sum(s.seconds for s in steps)
    return (f"{middle} step(s) over {b.n} commit(s) ({skipped} skipped), {builds} build(s), "
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
