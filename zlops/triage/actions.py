"""Triage: a person's change of an alert (one code path for ``zlops alert`` and the Airflow pages), and the inbox.

:func:`change_alert` records the change and queues its reply in the alert's Slack thread IN ONE
TRANSACTION, so a crash between the two cannot leave a change that never reaches the thread. It is safe
to retry: asking again for the change the same person just made (same state, same note) writes nothing
and answers the change already recorded, with the reply already queued; the state is changed by
compare-and-set, so two concurrent requests make one change and one message (the other is refused).

:func:`inbox` lists the open alerts grouped as the Slack summary groups series (commit range x op
family x pool, :func:`zlops.alerts.lifecycle.clusters`), worst first, each with its state, age, owner (the person
who acked it or marked it expected) and culprit (the first bad commit the judge's change point named,
when it named one). Every number is a stored one: the alert's reference and band, its last change and
worst step, the opening night's :class:`~zlops.model.Figures`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from zlops.alerts.lifecycle import ACTIONS, OPEN_STATES, Alert, AlertError, AlertState, clusters
from zlops.model import Comparison
from zlops.store import Store

if TYPE_CHECKING:
    from zlops.config.settings import Config

#: Longest note kept with a change (it is shown in the Slack thread).
MAX_NOTE_CHARS = 2000
#: Longest actor name (the ``alert_events.actor`` column).
MAX_ACTOR_CHARS = 100
_CHANGE_POINT = re.compile(r"change point: [^;]*? at ([0-9a-f]{7,40})\b")


@dataclass(frozen=True)
class HumanChange:
    """A person's change as recorded: ``reply_id`` is the thread reply queued in the outbox (None when the
    alert was never announced); ``repeated`` says this was a retry of the change already recorded."""

    before: Alert
    after: Alert
    event_id: int
    reply_id: int | None
    repeated: bool = False


def clean_note(note: str | None) -> str:
    """A note as stored: stripped, at most :data:`MAX_NOTE_CHARS`, no control characters but newlines and tabs."""
    text = (note or "").strip()
    if len(text) > MAX_NOTE_CHARS:
        raise AlertError(f"note: at most {MAX_NOTE_CHARS} characters, got {len(text)}")
    bad = sorted({f"U+{ord(ch):04X}" for ch in text if ch not in "\n\t" and unicodedata.category(ch) == "Cc"})
    if bad:
        raise AlertError(f"note: control characters are not allowed ({', '.join(bad)})")
    return text


def action_state(verb: str) -> AlertState:
    """The state a verb sets; AlertError naming the verbs for anything else."""
    try:
        return ACTIONS[verb]
    except KeyError:
        raise AlertError(f"unknown action {verb!r}; use one of {', '.join(ACTIONS)}") from None


def change_alert(store: Store, alert_id: int, to: AlertState, *, note: str = "", actor: str) -> HumanChange:
    """Set an open alert to ``to`` for ``actor`` with ``note`` and queue the thread reply (see the module
    docstring); AlertError when the lifecycle refuses it (closed, already in that state by someone else,
    changed meanwhile)."""
    from zlops.slack.announce import queue_human_reply
    from zlops.store import alerts as store_alerts
    from zlops.store.pages import people_changes

    note = clean_note(note)
    actor = actor.strip()[:MAX_ACTOR_CHARS]
    if not actor:
        raise AlertError("a change needs the name of the person who makes it")

    def work(session: Any) -> HumanChange:
        current = store_alerts.get_alert(session, alert_id)
        if current.state is to:
            last = people_changes(session, [alert_id]).get(alert_id)
            if last and (last["to_state"], last["actor"], last["note"]) == (to.value, actor, note):
                return HumanChange(current, current, last["id"], _reply_of(session, last["id"]), repeated=True)
        before, after, event_id = store_alerts.set_alert_state(session, alert_id, to, note=note, actor=actor)
        reply = queue_human_reply(session, before, after, event_id, note=note, actor=actor)
        return HumanChange(before, after, event_id, reply)

    return store.unit_of_work(work)


def _reply_of(session: Any, event_id: int) -> int | None:
    from sqlalchemy import select

    from zlops.store.models import Notification

    return session.scalars(select(Notification.id).where(Notification.kind == f"event-{event_id}")).first()


@dataclass(frozen=True)
class InboxAlert:
    """One open alert as the inbox shows it (every number a stored one)."""

    alert: Alert
    age: timedelta
    owner: str | None           # who acked it / marked it expected (their latest change), else None
    owner_note: str
    culprit: str | None         # the first bad commit named by the judge's change point, when known
    opening: Comparison | None  # the compare row that opened it: its verdict, note and Figures
    kernels: str | None = None  # whether its op's compiled kernels changed (zlops.kernels.attribution)

    @property
    def age_text(self) -> str:
        days, hours = self.age.days, self.age.seconds // 3600
        return f"{days} d {hours} h" if days else f"{hours} h {self.age.seconds % 3600 // 60} min"


@dataclass(frozen=True)
class InboxGroup:
    """The alerts of one (suite, commit range, op family, pool): one Slack thread's worth."""

    suite: str
    commit_range: str
    family: str
    pool: str
    alerts: tuple[InboxAlert, ...]

    @property
    def worst_pct(self) -> float | None:
        """The largest stored worst step of the group's alerts (what orders the groups)."""
        values = [a.alert.worst_worse_pct for a in self.alerts if a.alert.worst_worse_pct is not None]
        return max(values) if values else None


def culprit_of(opening: Comparison | None) -> str | None:
    """The commit the judge's change point named in the opening night's note (``... at 1a2b3c4``), if any."""
    if opening is None:
        return None
    found = _CHANGE_POINT.search(opening.judgement.note or "")
    return found.group(1) if found else None


def inbox(store: Store, *, suite: str | None = None, states: Collection[AlertState] = OPEN_STATES,
          limit: int = 500, now: datetime | None = None, config: Config | None = None) -> list[InboxGroup]:
    """The alerts in ``states`` (default: the open ones) grouped as the Slack summary groups series,
    the group with the worst step first, and in a group the worst alert first. Four reads in all; with
    ``config``, one more read that attributes each alert to its op's compiled kernels (a few queries per
    alert of a suite that records kernels, :func:`zlops.alerts.explain.attribution_texts`)."""
    from zlops.store.pages import opening_comparisons, people_changes

    alerts = store.alerts(suite=suite, states=states, limit=limit)
    ids = [a.id for a in alerts]
    people = store.read(people_changes, ids)
    openings = store.read(opening_comparisons, ids)
    bisected = store.culprits_of_alerts(ids)   # a bisection's verified culprit beats a change point's guess
    kernels: dict[int, str] = {}
    if config is not None:
        from zlops.alerts.explain import attribution_texts

        kernels = store.read(attribution_texts, alerts, config)
    now = now or datetime.now(timezone.utc)
    by_suite: dict[str, list[Alert]] = {}
    for a in alerts:
        by_suite.setdefault(a.suite, []).append(a)
    groups: list[InboxGroup] = []
    for suite_name, members in by_suite.items():
        for (span, family, pool), items in clusters([(a, None) for a in members]).items():
            rows = []
            for a, _ in items:
                change = people.get(a.id)
                owned = change is not None and a.state in (AlertState.ACKED, AlertState.EXPECTED) \
                    and change["to_state"] == a.state.value
                rows.append(InboxAlert(a, now - a.opened_at, change["actor"] if owned and change else None,
                                       change["note"] if owned and change else "", bisected.get(a.id) or culprit_of(openings.get(a.id)),
                                       openings.get(a.id), kernels.get(a.id)))
            rows.sort(key=lambda r: (-(r.alert.worst_worse_pct or 0.0), r.alert.case, r.alert.metric))
            groups.append(InboxGroup(suite_name, span, family, pool, tuple(rows)))
    groups.sort(key=lambda g: (-(g.worst_pct or 0.0), g.suite, g.pool, g.family, g.commit_range))
    return groups
