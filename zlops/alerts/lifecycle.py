"""The regression lifecycle: which series open, confirm, worsen or fix an alert tonight (pure).

One alert follows one regressed series (suite, pool, case, metric) from the night it was first
flagged until it is fixed or a person closes it. Only the judge moves it (issue 11): the lifecycle
never applies a band rule of its own to confirm anything. States (``docs/alerts.md``)::

    new ──(judge confirms)──> confirmed ──> acked / expected ──> fixed (judge confirms an improvement)
     │                           └──────────────────────────────> wontfix / false_positive (a person)
     └──(judge does not confirm: cleared by A/B, back in, unmeasurable)──> cleared (never announced)

- A SUSPECT (noise judge, not yet confirmed) or POTENTIAL (simple judge) series opens a ``new``
  alert that is **not announced**: nobody is paged for a change the judge has not confirmed.
- A derived metric's row (speedup, TFLOPS, GB/s: :mod:`zlops.judge.derived`) opens no alert: it has its
  source timing's verdict, and the source's alert is the case's. One alert per measured case.
- A companion timing (another clock on the same work: the collectives' ``wall_s`` around ``execute_s``,
  :data:`zlops.metrics.COMPANION_TIMINGS`) opens no alert where the timing it accompanies has one at least as
  firm for a change in the same direction; that alert's event names it. Alone, it alerts on its own.
- A REGRESSION or SEVERE series opens a ``confirmed`` alert (announced: a new thread); a ``new``
  alert becomes ``confirmed`` (announced then) only on a night the judge confirms it, and is closed
  quietly as ``cleared`` (its event says the verdict and the judge's reason) on a night the judge judges
  the series and does not flag it, or finds it unmeasurable (its noise hides the change).
- An open alert whose series the judge confirms IMPROVED is ``fixed`` when tonight is back within
  ``band_pct`` of the alert's reference (announced in its thread), else "partly recovered".
- A further confirmed regression of an open alert is announced in its thread as ``worsened`` while
  ``confirmed``; once a person acked it or marked it expected, that update is recorded but not
  announced. Nothing else about an open alert is ever re-announced.
- Every figure an alert shows is the verdict's own (:class:`zlops.model.Figures`): the change the
  report printed for that night, against the reference it names.
- ``acked``, ``expected``, ``false_positive`` and ``wontfix`` are set by people
  (``zlops alert ...``); see :func:`check_human_transition`.

Idempotent per run: a series whose alerts were already evaluated at this run or a later one
(``done``) is skipped, so re-running the report step changes nothing and announces nothing twice.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum

from zlops import metrics
from zlops.errors import ZlopsError
from zlops.model import Comparison, Verdict, change_text, is_canary, pct_change
from zlops.model import worse_pct as model_worse_pct

SeriesKey = tuple[str, str, str]  # (pool, case, metric)


class AlertError(ZlopsError):
    """An alert does not exist, or a person asked for a transition the lifecycle does not allow."""


class AlertState(str, Enum):
    NEW = "new"                        # flagged once, not confirmed: not announced
    CONFIRMED = "confirmed"            # announced: has its own thread
    ACKED = "acked"                    # a person is on it; updates are no longer announced
    EXPECTED = "expected"              # an intended trade-off; stays open until the series returns
    FALSE_POSITIVE = "false_positive"  # closed: not a real regression
    FIXED = "fixed"                    # closed: a confirmed improvement brought it back inside its band
    WONTFIX = "wontfix"                # closed: accepted for good
    CLEARED = "cleared"                # closed: the judge did not confirm it (never announced)

    @property
    def is_open(self) -> bool:
        return self in OPEN_STATES

    @property
    def quiet(self) -> bool:
        """Updates (worsened) of an alert in this state are recorded but not announced."""
        return self in (AlertState.ACKED, AlertState.EXPECTED)


OPEN_STATES = frozenset({AlertState.NEW, AlertState.CONFIRMED, AlertState.ACKED, AlertState.EXPECTED})
#: States a person sets with ``zlops alert <state> ID``.
HUMAN_STATES = frozenset({AlertState.ACKED, AlertState.EXPECTED, AlertState.FALSE_POSITIVE, AlertState.WONTFIX})
#: The verbs people use (``zlops alert <verb>``, the inbox's buttons) -> the state each sets. Here, not in
#: :mod:`zlops.triage.actions`, so that ``zlops --help`` builds its parser without importing the store.
ACTIONS: Mapping[str, AlertState] = {"ack": AlertState.ACKED, "expected": AlertState.EXPECTED,
                                     "false-positive": AlertState.FALSE_POSITIVE, "wontfix": AlertState.WONTFIX}
#: Verdicts that open a confirmed alert at once.
CONFIRMED_VERDICTS = frozenset({Verdict.REGRESSION, Verdict.SEVERE})
#: Verdicts that open an unannounced ``new`` alert (the judge has not confirmed them).
WATCH_VERDICTS = frozenset({Verdict.SUSPECT, Verdict.POTENTIAL})
#: Not-judged verdicts that still close a ``new`` alert: the judge looked at tonight's value and found that
#: the series' noise hides the change the alert waits for, so nothing will confirm it (docs/alerts.md).
#: The other gaps (no data, invalid shard, another caliber) leave it waiting.
CLEARING_GAPS = frozenset({Verdict.UNMEASURABLE})


class EventKind(str, Enum):
    OPENED = "opened"      # the alert was created (to_state new or confirmed)
    STATE = "state"        # a state change
    WORSENED = "worsened"  # same state, a further step beyond the band


@dataclass(frozen=True)
class Alert:
    """One alert as stored (see ``alerts`` in :mod:`zlops.store.models`)."""

    id: int
    suite: str
    pool: str
    case: str
    metric: str
    unit: str
    lower_is_better: bool
    state: AlertState
    opened_run: str
    last_run: str
    base_value: float          # the reference: the baseline median of the night it opened, in ``unit``
    band_pct: float            # back within this many percent of ``base_value`` = fixed
    first_base_sha: str        # the commit range it first appeared in
    first_head_sha: str
    last_head_sha: str         # the newest commit it was evaluated at
    last_change_pct: float | None
    worst_worse_pct: float | None
    thread_notification_id: int | None
    thread_ts: str | None
    channel_id: str | None
    note: str
    opened_at: datetime
    updated_at: datetime

    @property
    def key(self) -> SeriesKey:
        return (self.pool, self.case, self.metric)

    @property
    def family(self) -> str:
        return op_family(self.case)

    @property
    def commit_range(self) -> str:
        return commit_range(self.first_base_sha, self.first_head_sha)


@dataclass(frozen=True)
class Step:
    """One thing to write tonight for one series: open an alert, or change/update an open one."""

    comparison: Comparison
    alert_id: int | None               # None: open a new alert
    from_state: AlertState | None
    to_state: AlertState
    event: EventKind | None            # None: a silent update (last seen, last change), no event
    announce: bool
    change_pct: float | None           # tonight against the alert's reference (raw direction)
    worse_pct: float | None            # the same, positive = worse
    note: str = ""

    @property
    def key(self) -> SeriesKey:
        c = self.comparison
        return (c.pool, c.case, c.metric)


_FAMILY_END = re.compile(r"[/\s(\[<:,{]")
_DTYPE = re.compile(r"(?i)(f|fp|float|bf|bfloat|i|int|u|uint|c|complex)\d+|bool|half|double|float|int")


def op_family(case: str) -> str:
    """The operator family of a case name: what regressions are grouped by.

    Take the name up to the first ``/``, space, ``(``, ``[``, ``<``, ``:``, ``,`` or ``{``, then drop
    trailing ``_`` tokens that hold a digit or name a dtype; the first token always stays. So FlagGems
    ``abs/float16/(64x64)`` -> ``abs``, ``softmax_8192`` -> ``softmax``, ``layer_norm_8192`` ->
    ``layer_norm``, ``matmul_bf16`` -> ``matmul``, simpler ``benchmark_bgemm (Case0)`` ->
    ``benchmark_bgemm``, pytest ``test_add[fp32]`` -> ``test_add``, collectives
    ``mesh_p2_count65536_fp32_a2a3_d0-1/hccl`` -> ``mesh``.
    """
    head = _FAMILY_END.split(case.strip(), maxsplit=1)[0] or case.strip()
    tokens = head.split("_")
    while len(tokens) > 1 and (any(ch.isdigit() for ch in tokens[-1]) or _DTYPE.fullmatch(tokens[-1])
                               or tokens[-1] == ""):
        tokens.pop()
    return "_".join(tokens) or head


def commit_range(base_sha: str | None, head_sha: str) -> str:
    """``1111111..2222222``; ``..2222222`` without a baseline."""
    return f"{(base_sha or '')[:7]}..{head_sha[:7]}"


def change_range(base_sha: str | None, head_sha: str, previous_sha: str | None = None) -> str:
    """The commits a change of tonight came in, as ``base..head``: the baseline's commit to tonight's, or,
    when the baseline is tonight's own commit (the same code measured again, e.g. the second night of a
    change confirmed by two nights), ``previous_sha`` (the newest accepted run on another commit before
    tonight: :func:`previous_commit`) to tonight's; never the empty ``a1693d1..a1693d1``."""
    if previous_sha and (not base_sha or base_sha == head_sha):
        base_sha = previous_sha
    return commit_range(base_sha, head_sha)


def previous_commit(accepted: Iterable[tuple[str, datetime | None]], *, head_sha: str, before: datetime | None,
                    ancestors: Collection[str] | None = None) -> str | None:
    """The commit of the newest accepted run (``(sha, started_at)``, any order) that started before
    ``before``, on another commit than ``head_sha`` (and on ``ancestors`` when given); None without one."""
    best: tuple[datetime, str] | None = None
    for sha, started in accepted:
        if sha == head_sha or started is None or (before is not None and started >= before):
            continue
        if ancestors is not None and sha not in ancestors:
            continue
        if best is None or started > best[0]:
            best = (started, sha)
    return None if best is None else best[1]


def series_ranges(comparisons: Iterable[Comparison], head_sha: str, *, previous_sha: str | None = None,
                  alerts: Mapping[SeriesKey, str] | None = None) -> dict[SeriesKey, str]:
    """Per series, the commit range its change of tonight is reported under: the range of its alert when
    it has one (where the change was first seen: an alert opened on a suspect night keeps that night's
    range when a later night confirms it), else :func:`change_range` of its baseline. The one place the
    Slack summary, the report and the inbox take a series' range from."""
    alerts = alerts or {}
    out: dict[SeriesKey, str] = {}
    for c in comparisons:
        key = (c.pool, c.case, c.metric)
        out[key] = alerts.get(key) or change_range(c.base.sha if c.base else None, head_sha, previous_sha)
    return out


def worse_pct(base: float, head: float, *, lower_is_better: bool) -> float | None:
    """How much worse ``head`` is than ``base`` in percent (positive = worse, :func:`zlops.model.worse_pct`:
    a ratio); None for a zero base."""
    if base == 0:
        return None
    return model_worse_pct(base, head, lower_is_better=lower_is_better)


def reference_value(c: Comparison) -> float | None:
    """What the verdict compared tonight with, in ``c.unit``: the figures' reference (the reference a new
    alert keeps), else the baseline median."""
    if c.figures is not None:
        return c.figures.reference
    if c.base is None:
        return None
    value = c.base.median
    if c.base.unit != c.unit:
        try:
            value = metrics.convert(value, c.base.unit, c.unit)
        except ValueError:
            return None
    return value


def _head_in(alert: Alert, c: Comparison) -> float | None:
    head = c.head_value
    if head is None or c.unit == alert.unit:
        return head
    try:
        return metrics.convert(head, c.unit, alert.unit)
    except ValueError:
        return None


def plan_night(
    comparisons: Iterable[Comparison],
    open_alerts: Mapping[SeriesKey, Alert],
    *,
    done: frozenset[SeriesKey] | set[SeriesKey] = frozenset(),
    band_pct: float,
) -> list[Step]:
    """What tonight's comparisons do to the alerts (pure; see the module docstring for the rules).

    ``open_alerts`` holds at most one open alert per series; ``done`` the series already evaluated
    at this run or a later one (skipped). ``band_pct`` is the band a new alert keeps (the judge's
    potential threshold). Series without a value tonight (missing, failed, not judged) change nothing.
    """
    steps: list[Step] = []
    for c in sorted(comparisons, key=lambda c: (c.pool, c.case, c.metric)):
        key = (c.pool, c.case, c.metric)
        if key in done or c.head_value is None:
            continue
        alert = open_alerts.get(key)
        if alert is None:
            step = _open(c, band_pct)
        else:
            step = _evolve(alert, c)
        if step is not None:
            steps.append(step)
    return _fold_companions(steps, open_alerts)


def _firmness(state: AlertState | None) -> int:
    """How firm an open alert (or one opening tonight) is: 2 confirmed (or held by a person), 1 new, 0 none."""
    if state is None or not state.is_open:
        return 0
    return 1 if state is AlertState.NEW else 2


def _fold_companions(steps: list[Step], open_alerts: Mapping[SeriesKey, Alert]) -> list[Step]:
    """One alert per regressed case: a companion timing (:data:`zlops.metrics.COMPANION_TIMINGS`, e.g. the
    collectives' ``wall_s`` around ``execute_s``) that would open an alert tonight opens none where the timing
    it accompanies has an alert at least as firm, open or opening tonight, for a change in the same direction;
    that timing's event tonight names the companion's verdict and figures. Otherwise (the host's work alone
    got slower, or the companion is the firmer) the companion alerts on its own."""
    by_key = {s.key: i for i, s in enumerate(steps)}
    drop: set[int] = set()
    out = list(steps)
    for i, s in enumerate(steps):
        c = s.comparison
        principal = metrics.companion_of(c.metric)
        if s.alert_id is not None or principal is None or not (s.worse_pct or 0) > 0:
            continue
        key = (c.pool, c.case, principal)
        j = by_key.get(key)
        alert = open_alerts.get(key)
        p = steps[j] if j is not None else None
        firm = _firmness(p.to_state) if p is not None else _firmness(alert.state if alert else None)
        worse = (p.worse_pct if p is not None and p.worse_pct is not None else
                 alert.worst_worse_pct if alert is not None else None)
        if firm < _firmness(s.to_state) or not (worse or 0) > 0:
            continue
        drop.add(i)
        if j is not None and out[j].event is not None:
            with_ = (f"with {c.metric} {s.change_pct:+.2f}% ({c.verdict.label}), the same work's other clock: "
                     "no alert of its own" if s.change_pct is not None else
                     f"with {c.metric} ({c.verdict.label}), the same work's other clock: no alert of its own")
            out[j] = replace(out[j], note=f"{out[j].note}; {with_}" if out[j].note else with_)
    return [s for i, s in enumerate(out) if i not in drop]


def _figures(c: Comparison) -> tuple[float | None, float | None]:
    """The verdict's own change and worse figures (the numbers every rendering shows for this night)."""
    j = c.judgement
    return j.change_pct, j.worse_pct


def _open(c: Comparison, band_pct: float) -> Step | None:
    if c.verdict not in CONFIRMED_VERDICTS | WATCH_VERDICTS:
        return None
    if c.follows:   # a derived metric (speedup, TFLOPS ...): its source's alert is the case's (zlops.judge.derived)
        return None
    if is_canary(c.case):   # a recall canary zlops planted itself (zlops.judge.canary) pages nobody
        return None
    base, head = reference_value(c), c.head_value
    if base is None or head is None or base == 0:
        return None
    change, worse = _figures(c)
    confirmed = c.verdict in CONFIRMED_VERDICTS
    return Step(c, None, None, AlertState.CONFIRMED if confirmed else AlertState.NEW, EventKind.OPENED,
                announce=confirmed, change_pct=change, worse_pct=worse,
                note=f"judged {c.verdict.label}" + ("" if confirmed else ", not confirmed yet"))


def _evolve(alert: Alert, c: Comparison) -> Step | None:
    """Only the judge moves an alert: its confirmations, its clearings and its confirmed improvements."""
    if _head_in(alert, c) is None:
        return None
    change, worse = _figures(c)
    state = alert.state
    quiet = Step(c, alert.id, state, state, None, announce=False, change_pct=alert.last_change_pct, worse_pct=None)
    if state is AlertState.NEW:
        if c.verdict in CONFIRMED_VERDICTS:
            return Step(c, alert.id, state, AlertState.CONFIRMED, EventKind.STATE, announce=True, change_pct=change,
                        worse_pct=worse, note=f"confirmed by the judge: {c.verdict.label}")
        if c.verdict in WATCH_VERDICTS or (c.verdict.is_gap and c.verdict not in CLEARING_GAPS):
            return quiet   # still awaiting the judge (or nothing judged tonight)
        why = c.judgement.note.strip().splitlines()[0][:200] if c.judgement.note.strip() else ""
        return Step(c, alert.id, state, AlertState.CLEARED, EventKind.STATE, announce=False, change_pct=change,
                    worse_pct=worse, note=f"not confirmed by the judge ({c.verdict.label}"
                                          f"{': ' + why if why else ''}): closed quietly")
    if c.verdict in CONFIRMED_VERDICTS:   # a further confirmed step on top of the regression
        return Step(c, alert.id, state, state, EventKind.WORSENED, announce=not state.quiet, change_pct=change,
                    worse_pct=worse, note="worse again, confirmed by the judge" + (
                        f": {change_text(worse if change is None else change, worse)}" if worse is not None else ""))
    if c.verdict is Verdict.IMPROVED:     # a confirmed improvement: fixed when it is back near its reference
        head = _head_in(alert, c)
        assert head is not None
        left = worse_pct(alert.base_value, head, lower_is_better=alert.lower_is_better)
        if left is not None and left <= alert.band_pct:
            return Step(c, alert.id, state, AlertState.FIXED, EventKind.STATE, announce=True, change_pct=change,
                        worse_pct=worse, note=f"a confirmed improvement ({change:+.2f}%) brought it back within "
                                              f"±{alert.band_pct:g}% of its reference")
        return Step(c, alert.id, state, state, EventKind.STATE, announce=not state.quiet, change_pct=change,
                    worse_pct=worse, note=f"partly recovered: a confirmed improvement ({change:+.2f}%), still "
                                          f"{change_text(pct_change(alert.base_value, head), left)} against its "
                                          "reference" if left is not None else "partly recovered")
    return quiet


def check_human_transition(alert: Alert, to: AlertState) -> None:
    """Raise AlertError unless a person may move ``alert`` to ``to``.

    People set acked, expected, false_positive and wontfix, on an open alert only (a closed one
    stays closed: a regression that comes back opens a new alert).
    """
    if to not in HUMAN_STATES:
        allowed = ", ".join(sorted(s.value for s in HUMAN_STATES))
        raise AlertError(f"alert #{alert.id}: {to.value} is set by the nightly, not by hand; "
                         f"a person may set {allowed}")
    if not alert.state.is_open:
        raise AlertError(f"alert #{alert.id} is already closed ({alert.state.value}); "
                         "a regression that comes back opens a new alert")
    if alert.state is to:
        raise AlertError(f"alert #{alert.id} is already {to.value}")


def clusters(items: Sequence[tuple[Alert, Step | None]]) -> dict[tuple[str, str, str], list[tuple[Alert, Step | None]]]:
    """Group alerts by (commit range, op family, pool): one announcement thread per group."""
    out: dict[tuple[str, str, str], list[tuple[Alert, Step | None]]] = {}
    for alert, step in items:
        out.setdefault((alert.commit_range, alert.family, alert.pool), []).append((alert, step))
    return out
