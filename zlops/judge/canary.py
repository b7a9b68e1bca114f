"""Recall canaries: a known slowdown planted on a schedule, to measure whether the nightly would catch one.

A suite's ``canary:`` section (:class:`zlops.config.settings.CanaryConfig`, opt-in) names one measured case.
Every night zlops writes a series of its own beside it, ``<case> [canary]`` (:func:`zlops.model.canary_case`),
whose samples are the source case's raw samples of the night, on every device that measured it:

- on an **active** night (:func:`schedule`: ``hold_nights`` nights every ``every_nights``, the first episode
  after ``every_nights`` nights of history), scaled by :func:`scale`, the one place a slowdown is made: a time
  multiplied by ``1 + slowdown_pct/100``, a rate divided by it;
- on a **quiet** night, unscaled: the canary then carries its source's real noise, night after night.

So the canary goes through the very judge, history, A/B and A/B budget of every real series, on real
noise. Where the A/B re-measures it, its sides are its source's A/B runs (:func:`measured_cases` selects the
source's case, :func:`ab_results` plants the canary in each run's results): the head side scaled when
tonight is active, the base side never (the baseline night of an episode's first night is quiet; on the
night after an episode, the A/B of the return sees both sides quiet and clears it). A canary's rows open no
alert (:mod:`zlops.alerts.lifecycle`), are left out of the report's tables, Slack, the exit code and the
ledger's measurable share, and get a line of their own (:func:`night_line`).

Each night's canary rows are kept (table ``canary_nights``) with what was planted and the verdict;
:func:`episodes` makes the episodes of them (an episode: the nights one planting lasted, named by its first
night) and :func:`recall_of` the figures the trust ledger prints: an episode is **confirmed** when the judge
flagged the canary worse (regression or severe; potential under the simple judge) on one of its nights,
**missed** when its nights ended without that, **open** while they last; recall = confirmed / (confirmed +
missed); a **false alarm** is a quiet night whose canary was flagged worse while its source was not (a
confirmed improvement after an episode is its removal being seen, not counted).

Pure but :func:`tonight_of` and :func:`ab_results`, which read the run's meta (one query).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from zlops.model import CaseResult, Comparison, Verdict, canary_case, canary_source, is_canary

META_KEY = "canary"


@dataclass(frozen=True)
class CanaryNight:
    """Tonight on the canary's schedule: the clock (``night``, 0 = its first), and what is planted."""

    night: int
    active: bool
    episode: int | None   # the night the episode started (active nights only)
    pct: float            # the slowdown planted tonight, 0 on a quiet night

    def __post_init__(self) -> None:
        if self.night < 0 or self.pct < 0 or (self.episode is None) == self.active:
            raise ValueError(f"CanaryNight: inconsistent night {self.night}, active {self.active}, "
                             f"episode {self.episode}, pct {self.pct}")

    def to_meta(self) -> dict[str, Any]:
        return {"night": self.night, "active": self.active, "episode": self.episode, "pct": self.pct}

    @classmethod
    def from_meta(cls, data: Any) -> CanaryNight | None:
        if not isinstance(data, Mapping) or "night" not in data:
            return None
        episode = data.get("episode")
        return cls(int(data["night"]), bool(data.get("active")), None if episode is None else int(episode),
                   float(data.get("pct") or 0.0))


def schedule(night: int, *, every_nights: int, hold_nights: int, slowdown_pct: float) -> CanaryNight:
    """Whether the canary is planted on ``night`` (0-based count of its nights): nights ``k*every_nights`` to
    ``k*every_nights + hold_nights - 1`` for k >= 1, so every episode has ``every_nights`` nights of history
    before it and quiet nights after. Pure: a retried night gets the same answer."""
    if night < 0 or every_nights < 2 or not 1 <= hold_nights < every_nights:
        raise ValueError(f"schedule: night {night} >= 0 and 1 <= hold_nights ({hold_nights}) < every_nights "
                         f"({every_nights}) expected")
    offset = night % every_nights
    if night >= every_nights and offset < hold_nights:
        return CanaryNight(night, True, night - offset, float(slowdown_pct))
    return CanaryNight(night, False, None, 0.0)


def scale(samples: Sequence[float], pct: float, *, lower_is_better: bool) -> tuple[float, ...]:
    """``samples`` made ``pct`` percent slower: a time (lower is better) times ``1 + pct/100``, a rate (higher
    is better) over it, so the worse-ratio (:func:`zlops.model.worse_pct`) is ``pct`` either way. The one
    function that plants a slowdown; pure."""
    factor = 1.0 + pct / 100.0
    if factor <= 0:
        raise ValueError(f"scale: a slowdown of {pct}% is not a factor above 0")
    return tuple(v * factor for v in samples) if lower_is_better else tuple(v / factor for v in samples)


def plant(results: Sequence[CaseResult], case: str, metric: str | None, tonight: CanaryNight) -> list[CaseResult]:
    """The canary's results among one shard's ``results``: every metric of ``case`` (or ``metric`` alone) as
    ``<case> [canary]``, its samples scaled by tonight's slowdown (none on a quiet night)."""
    out = []
    for r in results:
        if r.case != case or (metric is not None and r.metric != metric):
            continue
        out.append(CaseResult(canary_case(case), r.metric, r.unit, r.lower_is_better,
                              scale(r.samples, tonight.pct, lower_is_better=r.lower_is_better),
                              params={"canary_of": case, "planted_pct": tonight.pct}))
    return out


def plant_pairs(samples: Sequence[Sequence[Any]], case: str, metric: str | None, tonight: CanaryNight,
                lower_is_better: Mapping[str, bool]) -> list[list[Any]]:
    """A paired night's ``[case, metric, base runs, head runs]`` (zlops.judge.paired's run meta) with the canary
    beside its source: its base runs the source's, its head runs scaled by tonight's slowdown, as an A/B's
    sides (``lower_is_better``: per metric of the source case; a metric it does not name is left out)."""
    own = [list(s) for s in samples if not is_canary(str(s[0]))]
    out = list(own)
    for c, m, base, head in own:
        if c == case and (metric is None or m == metric) and m in lower_is_better:
            out.append([canary_case(case), m, list(base),
                        list(scale(head, tonight.pct, lower_is_better=lower_is_better[m]))])
    return out


def measured_cases(cases: Sequence[str] | None) -> tuple[str, ...] | None:
    """What a run must measure for ``cases`` (an A/B's selection): a canary's source case in its place."""
    if cases is None:
        return None
    return tuple(dict.fromkeys(canary_source(c) for c in cases))


def tonight_of(ctx: Any) -> CanaryNight | None:
    """The canary's night of the run ``ctx`` names, as the ingest step planted it (run meta); None: none."""
    cfg = ctx.suite.canary
    if cfg is None or not cfg.enabled:
        return None
    run = ctx.store.get_run(ctx.run_key)
    return CanaryNight.from_meta((run.meta or {}).get(META_KEY)) if run is not None else None


def ab_results(ctx: Any, side_ctx: Any, results: Sequence[CaseResult]) -> list[CaseResult]:
    """One A/B run's results with the canary planted as tonight's night planted it: scaled on the head side
    (``side_ctx`` is the night's own context) when tonight is active, unscaled on the base side."""
    tonight = tonight_of(ctx)
    if tonight is None:
        return list(results)
    own = [r for r in results if not is_canary(r.case)]
    head = side_ctx.run_key == ctx.run_key
    state = tonight if head else CanaryNight(tonight.night, False, None, 0.0)
    return [*own, *plant(own, ctx.suite.canary.case, ctx.suite.canary.metric, state)]


def decided_by(c: Comparison) -> str:
    """What decided a row's verdict: the A/B, paired runs, or the nights."""
    label = c.figures.reference_label if c.figures is not None else ""
    return "A/B" if label.startswith("A/B") else "paired runs" if label.startswith("paired") else "nights"


def planted_nights(tonight: CanaryNight, planted: Sequence[tuple[str, CaseResult]]) -> list[dict[str, Any]]:
    """The canary nights to store at planting: one per (pool, canary series), no verdict yet."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for pool, r in planted:
        seen.setdefault((pool, r.case, r.metric), _night(tonight, pool, r.case, r.metric))
    return list(seen.values())


def judged_nights(tonight: CanaryNight, rows: Sequence[Comparison]) -> list[dict[str, Any]]:
    """The canary nights to store once the night is judged: one per canary row planted tonight and judged on
    its own (a derived row follows its source's verdict and is not counted twice; a row without tonight's
    value, its source not measured, was not planted), with its verdict, its source's verdict the same night,
    the change and what decided it."""
    by_key = {(c.pool, c.case, c.metric): c for c in rows}
    out = []
    for c in rows:
        if not is_canary(c.case) or c.follows or c.head is None:
            continue
        source = by_key.get((c.pool, canary_source(c.case), c.metric))
        out.append({**_night(tonight, c.pool, c.case, c.metric), "verdict": c.verdict.value,
                    "source_verdict": source.verdict.value if source is not None else None,
                    "change_pct": c.judgement.change_pct, "how": decided_by(c)})
    return out


def _night(tonight: CanaryNight, pool: str, case: str, metric: str) -> dict[str, Any]:
    return {"pool": pool, "case": case, "metric": metric, "source_case": canary_source(case), "night": tonight.night,
            "active": tonight.active, "episode": tonight.episode, "planted_pct": tonight.pct}


# --- episodes and recall (the trust ledger) ------------------------------------------------------

def _flagged(verdict: str | None) -> bool:
    try:
        return verdict is not None and Verdict(verdict).flagged
    except ValueError:
        return False


@dataclass(frozen=True)
class Episode:
    """One planting of one canary series: from its first night, ``hold_nights`` long."""

    suite: str
    pool: str
    case: str
    metric: str
    start: int                        # the night it was first planted
    planted_pct: float
    started_at: datetime
    state: str                        # confirmed, missed, open
    confirmed_night: int | None = None
    how: str | None = None            # what confirmed it: A/B, nights, paired runs

    @property
    def nights_to_confirm(self) -> int | None:
        """Nights after the first planted night the judge confirmed it (0: that very night)."""
        return None if self.confirmed_night is None else self.confirmed_night - self.start


def episodes(nights: Sequence[Mapping[str, Any]]) -> list[Episode]:
    """The episodes of stored canary nights (``canary_nights`` rows as mappings, any order): per canary series
    and start night, confirmed on the first of its nights the canary was flagged worse, missed when a later
    quiet night of the series shows it ended without that, open otherwise. Pure."""
    series: dict[tuple[str, str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for n in nights:
        series[(n["suite"], n["pool"], n["case"], n["metric"])].append(n)
    out = []
    for (suite, pool, case, metric), rows in sorted(series.items()):
        rows = sorted(rows, key=lambda n: (n["night"], n["at"]))
        starts: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
        for n in rows:
            if n["active"] and n["episode"] is not None:
                starts[int(n["episode"])].append(n)
        for start, mine in sorted(starts.items()):
            hit = next((n for n in mine if _flagged(n["verdict"])), None)
            last = max(int(n["night"]) for n in mine)
            ended = any(not n["active"] and int(n["night"]) > last for n in rows) or \
                any(n["active"] and (n["episode"] or 0) > start for n in rows)
            state = "confirmed" if hit is not None else ("missed" if ended and all(
                n["verdict"] is not None for n in mine) else "open")
            out.append(Episode(suite, pool, case, metric, start, float(mine[0]["planted_pct"]), mine[0]["at"], state,
                               None if hit is None else int(hit["night"]), None if hit is None else hit["how"]))
    return sorted(out, key=lambda e: (e.started_at, e.suite, e.pool, e.case, e.metric))


@dataclass(frozen=True)
class Recall:
    """The canaries' figures of a window (:func:`recall_of`)."""

    episodes: tuple[Episode, ...] = ()
    quiet_nights: int = 0             # quiet canary nights the judge judged
    false_alarms: int = 0             # ... on which it flagged the canary worse while its source was not

    def count(self, state: str) -> int:
        return sum(e.state == state for e in self.episodes)

    @property
    def decided(self) -> int:
        return self.count("confirmed") + self.count("missed")

    @property
    def recall(self) -> float | None:
        return self.count("confirmed") / self.decided if self.decided else None

    @property
    def nights_to_confirm(self) -> tuple[int, ...]:
        return tuple(sorted(e.nights_to_confirm for e in self.episodes if e.nights_to_confirm is not None))

    @property
    def median_nights_to_confirm(self) -> float | None:
        days = self.nights_to_confirm
        return float(statistics.median(days)) if days else None

    @property
    def false_alarm_rate(self) -> float | None:
        return self.false_alarms / self.quiet_nights if self.quiet_nights else None


def recall_of(nights: Sequence[Mapping[str, Any]]) -> Recall:
    """The episodes whose first night is among ``nights`` (a window's canary nights, read in one query) and
    the quiet nights' false alarms. Pure."""
    quiet = [n for n in nights if not n["active"] and n["verdict"] is not None
             and not Verdict(n["verdict"]).is_gap]
    alarms = sum(_flagged(n["verdict"]) and not _flagged(n["source_verdict"]) for n in quiet)
    starts = {(n["suite"], n["pool"], n["case"], n["metric"], n["night"]) for n in nights
              if n["active"] and n["episode"] == n["night"]}
    eps = tuple(e for e in episodes(nights) if (e.suite, e.pool, e.case, e.metric, e.start) in starts)
    return Recall(eps, len(quiet), alarms)


def night_line(row: Mapping[str, Any], episode: Episode | None) -> str:
    """A canary night as the report says it, one line, e.g. ``canary local/alpha [canary] time: planted +5% on
    night 14 (tonight, night 14): severe +5.02%; confirmed on night 14 (the night it was planted) by A/B``."""
    name = f"canary {row['pool']}/{row['case']} {row['metric']}"
    verdict = row.get("verdict")
    judged = "not judged yet" if verdict is None else Verdict(verdict).label + (
        f" {row['change_pct']:+.2f}%" if row.get("change_pct") is not None else "")
    if not row["active"]:
        line = f"{name}: quiet night {row['night']} (nothing planted): {judged}"
        if _flagged(verdict) and not _flagged(row.get("source_verdict")):
            line += " - a false alarm on the canary (its source was not flagged)"
        if episode is not None and episode.state == "missed":
            line += f"; the +{episode.planted_pct:g}% planted on night {episode.start} was missed"
        return line
    line = (f"{name}: planted +{row['planted_pct']:g}% on night {row['episode']} (tonight night {row['night']}): "
            f"{judged}")
    if episode is not None and episode.state == "confirmed":
        after = episode.nights_to_confirm
        when = "the night it was planted" if after == 0 else f"{after} night(s) after planting"
        line += f"; confirmed on night {episode.confirmed_night} ({when}) by {episode.how}"
    else:
        line += "; not confirmed yet"
    return line
