"""The trust ledger: what the alerts of a window came to, and whether people can trust the next one.

For the alerts opened in ``[since, until)`` (a cohort, as Perfherder's sheriffing reports count them),
as their events stood at ``until``:

- **opened**, **confirmed** (the judge confirmed it: announced, a person was paged), and what people
  made of them: **acked**, **expected**, **false-positive**, **wontfix** (alerts with a person's change
  to that state), and what the judge did: **fixed**, **cleared**; **waiting**: confirmed, still open,
  and no person has looked at it yet.
- **time to triage**: from the confirmation to the first person's change (zero when a person acted
  before it was confirmed), per confirmed alert a person changed; the median and the longest.
- **precision** estimated from people's own verdicts: of the confirmed alerts a person judged (the
  latest person's change: acked, expected, wontfix or false-positive), the share NOT marked
  false-positive: ``real / judged``. Unconfirmed alerts people judged are counted apart.
- **share of series measurable**: of the compare rows of the nightly runs started in the window,
  those the judge could judge, over all rows but ``new`` (no baseline yet is not a gap); the gaps
  (unmeasurable, invalid, missing, failed, incomparable) are counted beside it. A recall canary's rows are
  not counted: they are zlops' own.
- **coverage**: the share of series-nights watched at the potential and the regression threshold (by the
  nights, or through the A/B) and why the others were not, added up from what each nightly run of the window
  stored at its report (:mod:`zlops.judge.coverage`: its meta ``coverage``, one read for the window); the
  nights that stored none (reported before coverage was recorded) are counted beside it.
- **recall** from the recall canaries (:mod:`zlops.judge.canary`, opt-in per suite): of the canary episodes
  planted in the window (a known slowdown of one case, its series ``<case> [canary]``), those the judge
  confirmed over those decided (confirmed or missed; episodes still planted at the window's end are open),
  the median nights from planting to confirmation, and the false alarms on the canary's quiet nights: the
  other half of precision.

:func:`ledger` reads the store in five queries (:mod:`zlops.store.ledger`, :mod:`zlops.store.canaries`)
and computes with the pure :func:`compute_ledger`; :func:`ledger_lines` is the one text of it, printed by the
page, the CLI and the weekly Slack digest (:func:`queue_digest`, through the outbox).
"""

from __future__ import annotations

import statistics
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from zlops.alerts.lifecycle import AlertState
from zlops.judge import coverage as cover
from zlops.judge.canary import Recall, recall_of
from zlops.model import Verdict
from zlops.store import Store

#: Verdicts that are a coverage gap (the judge could not judge the series).
GAPS = (Verdict.UNMEASURABLE, Verdict.INVALID, Verdict.MISSING, Verdict.FAILED, Verdict.INCOMPARABLE)
#: What people can set: counted per alert once, whatever came after.
PEOPLE_STATES = (AlertState.ACKED, AlertState.EXPECTED, AlertState.FALSE_POSITIVE, AlertState.WONTFIX)
MAX_DAYS = 366


@dataclass(frozen=True)
class Ledger:
    suite: str | None                  # None: every suite
    since: datetime
    until: datetime
    opened: int
    confirmed: int
    by_people: Mapping[str, int]       # people's state -> alerts a person set to it (PEOPLE_STATES)
    fixed: int
    cleared: int
    waiting: int                       # confirmed, open, no person's change yet
    triage_hours: tuple[float, ...]    # per confirmed alert a person changed, ascending
    judged: int                        # confirmed alerts a person judged (latest person's change)
    judged_real: int                   # ... whose latest person's change is not false-positive
    judged_unconfirmed: int            # unconfirmed alerts a person judged
    unconfirmed_false_positive: int
    verdicts: Mapping[str, int] = field(default_factory=dict)   # compare rows of the window per verdict
    nights: int = 0                    # nightly runs started in the window
    canary: Recall = field(default_factory=Recall)   # the recall canaries' episodes planted in the window
    #: the window's coverage in series-nights, one per pair of thresholds the nights used (zlops.judge.coverage)
    coverage: tuple[cover.Coverage, ...] = ()
    coverage_nights: int = 0           # nightly runs of the window that stored their coverage

    @property
    def precision(self) -> float | None:
        return self.judged_real / self.judged if self.judged else None

    @property
    def median_triage_hours(self) -> float | None:
        return statistics.median(self.triage_hours) if self.triage_hours else None

    @property
    def rows(self) -> int:
        """Compare rows that count for measurability (all but ``new``)."""
        return sum(n for v, n in self.verdicts.items() if v != Verdict.NEW.value)

    @property
    def gaps(self) -> dict[str, int]:
        return {v.value: self.verdicts.get(v.value, 0) for v in GAPS}

    @property
    def measurable(self) -> int:
        return self.rows - sum(self.gaps.values())

    @property
    def measurable_share(self) -> float | None:
        return self.measurable / self.rows if self.rows else None


def compute_ledger(alerts: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]], *,
                   since: datetime, until: datetime, suite: str | None = None,
                   verdicts: Mapping[str, int] | None = None, nights: int = 0,
                   canary_nights: Sequence[Mapping[str, Any]] = (),
                   coverage: Sequence[Mapping[str, Any]] = ()) -> Ledger:
    """The ledger of ``alerts`` (each with ``id``) from their ``events`` (``alert_id``, ``at``, ``to_state``,
    ``by_person``; in the order written, none at or after ``until``), the window's ``canary_nights``
    (:func:`zlops.store.canaries.window_canary_nights`) and its nights' stored ``coverage`` (each a run meta's
    ``coverage``, :func:`zlops.judge.coverage.to_meta`); pure. See the module docstring."""
    by_alert: dict[int, list[Mapping[str, Any]]] = {int(a["id"]): [] for a in alerts}
    for e in events:
        if e["alert_id"] in by_alert and e["at"] < until:
            by_alert[e["alert_id"]].append(e)
    people = {s.value: 0 for s in PEOPLE_STATES}
    confirmed = fixed = cleared = waiting = judged = real = judged_new = fp_new = 0
    hours: list[float] = []
    for history in by_alert.values():
        states = [e["to_state"] for e in history]
        person = [e for e in history if e["by_person"]]
        for s in {e["to_state"] for e in person}:
            if s in people:
                people[s] += 1
        fixed += AlertState.FIXED.value in states
        cleared += AlertState.CLEARED.value in states
        was_confirmed = next((e for e in history if e["to_state"] == AlertState.CONFIRMED.value), None)
        verdict = person[-1]["to_state"] if person else None
        if was_confirmed is None:
            if verdict is not None:
                judged_new += 1
                fp_new += verdict == AlertState.FALSE_POSITIVE.value
            continue
        confirmed += 1
        if not person:
            waiting += bool(states) and AlertState(states[-1]).is_open
            continue
        hours.append(max(0.0, (person[0]["at"] - was_confirmed["at"]).total_seconds() / 3600))
        judged += 1
        real += verdict != AlertState.FALSE_POSITIVE.value
    return Ledger(suite, since, until, len(by_alert), confirmed, people, fixed, cleared, waiting, tuple(sorted(hours)),
                  judged, real, judged_new, fp_new, dict(verdicts or {}), nights,
                  recall_of([n for n in canary_nights if since <= n["at"] < until]),
                  tuple(cover.summed([c for meta in coverage for c in cover.from_meta(meta, suite or "")],
                                     suite=suite or "")),
                  sum(1 for meta in coverage if cover.readable(meta)))


def window(days: int, until: datetime | None = None) -> tuple[datetime, datetime]:
    """``(until - days, until)``; ``until`` defaults to now (UTC)."""
    if not 1 <= days <= MAX_DAYS:
        raise ValueError(f"days: expected 1..{MAX_DAYS}, got {days}")
    end = (until or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return end - timedelta(days=days), end


def ledger(store: Store, *, days: int = 7, until: datetime | None = None, suite: str | None = None) -> Ledger:
    """The ledger of the ``days`` before ``until`` (default now), from the store in five queries."""
    from zlops.store import ledger as reads
    from zlops.store.canaries import window_canary_nights

    since, end = window(days, until)
    alerts = store.read(reads.window_alerts, since, end, suite=suite)
    events = store.read(reads.window_events, [a["id"] for a in alerts], end)
    verdicts, nights = store.read(reads.window_verdicts, since, end, suite=suite)
    canary_nights = store.read(window_canary_nights, since, end, suite=suite)
    coverage = store.read(reads.window_run_meta, since, end, cover.META_KEY, suite=suite)
    return compute_ledger(alerts, events, since=since, until=end, suite=suite, verdicts=verdicts, nights=nights,
                          canary_nights=canary_nights, coverage=coverage)


def _pct(share: float | None) -> str:
    if share is None:
        return "—"
    return f"{share:.0%}" if round(share * 100, 1) == round(share * 100) else f"{share:.1%}"


def ledger_lines(led: Ledger) -> list[str]:
    """The ledger as text, each number beside what it is made of (the page, the CLI and Slack print these)."""
    p = led.by_people
    scope = f"suite {led.suite}" if led.suite else "all suites"
    lines = [f"{led.since:%Y-%m-%d %H:%M} to {led.until:%Y-%m-%d %H:%M} UTC, {scope}: {led.nights} nightly run(s)",
             (f"Alerts opened: {led.opened}; confirmed (announced): {led.confirmed}; by people: "
              f"{p['acked']} acked, {p['expected']} expected, {p['false_positive']} false-positive, "
              f"{p['wontfix']} wontfix; by the judge: {led.fixed} fixed, {led.cleared} cleared; "
              f"waiting for a person: {led.waiting}")]
    if led.triage_hours:
        lines.append(f"Time to triage (confirmation to the first person's change): median "
                     f"{led.median_triage_hours:.1f} h over {len(led.triage_hours)} alert(s), longest "
                     f"{led.triage_hours[-1]:.1f} h")
    else:
        lines.append("Time to triage: no confirmed alert was changed by a person yet")
    if led.judged:
        lines.append(f"Precision from people's verdicts: {_pct(led.precision)} = {led.judged_real} of {led.judged} "
                     "confirmed alert(s) judged by people were not false-positive")
    else:
        lines.append("Precision from people's verdicts: — (no confirmed alert judged by a person yet)")
    if led.judged_unconfirmed:
        lines.append(f"People also judged {led.judged_unconfirmed} unconfirmed alert(s): "
                     f"{led.unconfirmed_false_positive} false-positive")
    gaps = ", ".join(f"{n} {v}" for v, n in led.gaps.items())
    lines.append(f"Measurable: {_pct(led.measurable_share)} = {led.measurable} of {led.rows} series-nights "
                 f"({gaps}; {led.verdicts.get(Verdict.NEW.value, 0)} new without a baseline, not counted)")
    lines += coverage_lines(led)
    lines.append(recall_line(led.canary))
    return lines


def coverage_lines(led: Ledger) -> list[str]:
    """The ledger's coverage: the series-nights watched at both thresholds and why the others were not, as
    each night's report said it (:func:`zlops.judge.coverage.coverage_line`), one line per pair of thresholds."""
    if not led.coverage:
        return [f"Coverage: — (none of the {led.nights} nightly run(s) of the window recorded its coverage)"]
    recorded = (f"all {led.nights} nightly run(s)" if led.coverage_nights == led.nights
                else f"{led.coverage_nights} of {led.nights} nightly run(s) that recorded it")
    return [f"Coverage over the series-nights of {recorded}: {cover.coverage_line(c).removeprefix('coverage: ')}"
            for c in led.coverage]


def recall_line(rec: Recall) -> str:
    """The recall canaries' line of the ledger: recall beside the false alarms on the canary's quiet nights."""
    quiet = (f"false alarms on quiet canary nights: {rec.false_alarms} of {rec.quiet_nights}"
             if rec.quiet_nights else "no quiet canary night judged")
    if not rec.episodes:
        return f"Recall (canaries): — (no canary episode planted in the window; {quiet})"
    slow = sorted({e.planted_pct for e in rec.episodes})
    planted = "/".join(f"+{p:g}%" for p in slow)
    median = rec.median_nights_to_confirm
    when = (f", median {median:g} night(s) from planting to confirmation" if median is not None else "")
    opened = f", {rec.count('open')} still planted" if rec.count("open") else ""
    if not rec.decided:
        return (f"Recall (canaries): — ({len(rec.episodes)} episode(s) of {planted} planted, none decided yet"
                f"{opened}; {quiet})")
    return (f"Recall (canaries): {_pct(rec.recall)} = {rec.count('confirmed')} of {rec.decided} planted "
            f"slowdown(s) ({planted}) confirmed, {rec.count('missed')} missed{opened}{when}; {quiet}")


def digest_payload(led: Ledger, *, channel: str, page_url: str | None = None) -> dict[str, Any]:
    """The weekly Slack digest of a ledger (``chat.postMessage`` arguments)."""
    lines = ledger_lines(led)
    body = "\n".join(f"• {line}" for line in lines[1:])
    if page_url:
        body += f"\n<{page_url}|the trust page>"
    return {"channel": channel, "text": f"zlops trust ledger, {lines[0]}",
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f"*zlops trust ledger*, {lines[0]}"}},
                       {"type": "section", "text": {"type": "mrkdwn", "text": body[:2900]}}]}


def queue_digest(store: Store, led: Ledger, *, channel: str, page_url: str | None = None) -> tuple[int, str]:
    """Queue the digest in the outbox (filed under the newest nightly run of the window's end, keyed by
    the window, so queuing one week's digest again returns the same message); (its id, that run key).

    A store without a nightly run before the window's end has nothing to file it under: ValueError.
    """
    from zlops.store import ledger as reads

    run_key = store.read(reads.newest_nightly, led.until, suite=led.suite)
    if run_key is None:
        raise ValueError(f"no nightly run{' of ' + led.suite if led.suite else ''} started before "
                         f"{led.until:%Y-%m-%d %H:%M} UTC: there is nothing to digest")
    kind = f"digest-{led.since:%Y%m%dT%H%M}-{led.until:%Y%m%dT%H%M}" + (
        f"-{zlib.crc32(led.suite.encode()):08x}" if led.suite else "")
    return store.queue_notification(run_key, kind, channel, digest_payload(led, channel=channel, page_url=page_url)), \
        run_key


@dataclass(frozen=True)
class DigestOutcome:
    ledger: Ledger
    notification_id: int
    run_key: str
    sent: bool           # the outbox flush posted it (False: it waits in the outbox)


def post_digest(store: Store, *, channel: str, client: Any = None, days: int = 7, until: datetime | None = None,
                suite: str | None = None, page_url: str | None = None) -> DigestOutcome:
    """Queue the ledger of the ``days`` before ``until`` as the weekly digest and, with a Slack ``client``,
    flush the outbox (``zlops digest`` and the ``zlops_digest`` DAG). A failed post loses nothing: the
    message waits in the outbox for the next flush (the ``zlops_outbox`` DAG)."""
    from zlops.slack.outbox import flush_outbox

    led = ledger(store, days=days, until=until, suite=suite)
    notification_id, run_key = queue_digest(store, led, channel=channel, page_url=page_url)
    sent = False
    if client is not None:
        report = flush_outbox(store, client)
        sent = notification_id in report.sent
    return DigestOutcome(led, notification_id, run_key, sent)
