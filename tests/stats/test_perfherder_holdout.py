"""Issue 22's acceptance item on real Mozilla Perfherder series, held out: "a higher-is-better series with 25%
process noise falling to 15% of its level is flagged within two nights".

The series (tests/data/perfherder/, PROVENANCE.md there) are real firefox-android browsertime page loads from
Mozilla's ICPE 2025 dataset (mozilla/REALISE-Performance), chosen by a criterion written before any replay, one
value per push (the median of its replicates), and replayed night by night through the production screening
(``night_walk.walk``: ``series_histories`` + the vectorized and per-series noise judges, ``Policy()`` defaults,
no A/B). What the dataset could give (PROVENANCE.md): the screened pool holds one higher-is-better series
(speedometer3, 2.9% noise, no step) and the dataset's bug-filed regressions no higher-is-better fall beyond -35%
(motionmark-animometer-ramp); so the alerted cases are lower-is-better, where zlops judges the same log ratio
mirrored (a 6.7x time is as loud as a fall to 15%):

- ``sina_warm_collapse`` (A1, step size): signature 4654575, sina LastVisualChange warm, alert 190488 (+2729.53%,
  reassigned, TP): 265 ms -> 7247 ms, a 27.4x step on 9.7% noise (log-sd of the 30 pushes before).
- ``cnn_cold_fall`` (A2, shape): signature 4654314, cnn LastVisualChange cold, alert 189025 (-74.05%, downstream,
  TP): a level with 20.0% noise falling to 26.8% of itself. Lower is better: an improvement, the item's shape with
  the other label.
- ``sina_cold_bimodal`` (A3, noise): signature 4654566, sina LastVisualChange cold, alert 190485 (+179.35%,
  reassigned, TP): 2.65x on 43.9% noise (two process levels, ~3500 and ~8000 ms). Not flagged: xfail, a finding.
- controls, no alert in the window: 4653998 google-maps, 4654106 google, 4654581 sina loadtime (all warm
  LastVisualChange/loadtime), 45 pushes each, log-sd 21.1%, 20.6%, 21.1%.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest
from night_walk import CONFIRMED, walk

from zlops.model import Judgement, Verdict

DATA = Path(__file__).resolve().parents[1] / "data" / "perfherder"
META = json.loads((DATA / "series.json").read_text(encoding="utf-8"))
ALERTED = sorted(n for n, s in META["series"].items() if s["role"] == "alerted")
CONTROLS = sorted(n for n, s in META["series"].items() if s["role"] == "control")


@dataclass(frozen=True)
class Series:
    values: tuple[float, ...]   # one per push: the median of its replicates, in push order
    jump: int | None            # index of the first push at the new level (the alerted step), None for a control
    lower_is_better: bool


@lru_cache(maxsize=None)
def load(name: str) -> Series:
    spec = META["series"][name]
    replicates: dict[int, list[float]] = {}
    with (DATA / spec["file"]).open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            replicates.setdefault(int(row["push_id"]), []).append(float(row["value"]))
    pushes = list(replicates)
    jump = pushes.index(spec["jump_push_id"]) if "jump_push_id" in spec else None
    return Series(tuple(statistics.median(v) for v in replicates.values()), jump, META["common"]["lower_is_better"])


@lru_cache(maxsize=None)
def nights(name: str) -> tuple[Judgement, ...]:
    """The judgements of nights 1.. of the series (night i at index i - 1)."""
    s = load(name)
    return tuple(walk(list(s.values), lower_is_better=s.lower_is_better))


def log_sd_pct(values: tuple[float, ...] | list[float]) -> float:
    return statistics.stdev(math.log(v) for v in values) * 100.0


def step_ratio(s: Series) -> float:
    assert s.jump is not None
    return statistics.median(s.values[s.jump:]) / statistics.median(s.values[:s.jump])


def test_the_fixtures_are_the_selected_windows() -> None:
    """30 pushes before the step and 12 from it; 45 for a control; the figures of the selection (PROVENANCE.md)."""
    figures = {name: (round(log_sd_pct(load(name).values[:load(name).jump]), 1), round(step_ratio(load(name)), 2))
               for name in ALERTED}
    assert figures == {"sina_warm_collapse": (9.7, 27.4), "cnn_cold_fall": (20.0, 0.27),
                       "sina_cold_bimodal": (43.9, 2.65)}
    assert all(load(n).jump == 30 and len(load(n).values) == 42 for n in ALERTED)
    assert {n: round(log_sd_pct(load(n).values), 1) for n in CONTROLS} == {
        "google_maps_warm": 21.1, "google_warm": 20.6, "sina_loadtime_warm": 21.1}
    assert all(len(load(n).values) == 45 for n in CONTROLS)


@pytest.mark.parametrize("name", ALERTED)
def test_no_confirmed_verdict_before_the_step(name: str) -> None:
    """The 29 nights judged before each step: suspects at most (the first nights, one to five processes known),
    never a confirmed regression, severe or improvement."""
    before = nights(name)[:load(name).jump - 1]
    assert not [(i, j.verdict, j.note) for i, j in enumerate(before, start=1) if j.verdict in CONFIRMED]


def test_the_sina_collapse_is_confirmed_by_its_second_night() -> None:
    """A1, the step-size match: sina LastVisualChange (warm, a51), 30 pushes at ~265 ms (9.7% noise), then the
    sina page change of 2024-02-28 (push c52952a4, alert 190488 four pushes later: +2729.53%, reassigned, TP):
    ~7250 ms, 27.4x, four times the item's 6.7x. Night 30: suspect, +2991.79% worse vs the median of 30 nights
    (264.45 ms), threshold 29.97% (noise 8.74%); night 31: severe, two consecutive nights (+2991.79%, +2628.64%).
    The confirmed change restarts the window: on the last night, 11 after the step, the noise is the new level's
    own (4.79%; the 12 pushes at the new level: 5.8% log-sd), not the mixture's."""
    s, n = load("sina_warm_collapse"), nights("sina_warm_collapse")
    step, second, last = n[s.jump - 1], n[s.jump], n[-1]
    assert step.verdict is Verdict.SUSPECT, step.note
    assert step.worse_pct == pytest.approx(2991.79, abs=0.01) and step.threshold_pct == pytest.approx(29.97, abs=0.01)
    assert second.verdict is Verdict.SEVERE and "two consecutive nights" in (second.note or ""), second.note
    assert second.worse_pct == pytest.approx(2628.64, abs=0.01)
    own = log_sd_pct(s.values[s.jump:])
    assert last.figures is not None and last.figures.noise_pct is not None
    assert last.figures.noise_pct == pytest.approx(4.79, abs=0.01) and last.figures.noise_pct < 2 * own


def test_the_cnn_fall_to_27pct_on_20pct_noise_is_confirmed_by_its_second_night() -> None:
    """A2, the item's shape: cnn LastVisualChange (cold, a51), 30 pushes of a ~17300 ms level with 20.0% noise
    (zlops: 23.35%), then push ac3a4eaa of 2024-01-31 (alert 189025: -74.05%, downstream, TP): ~4600 ms, 26.8% of
    the level. Lower is better, so this fall is an improvement: the same log ratio as the item's throughput
    falling to 27%, with the other label. Night 30: suspect_improved, -73.71% vs the median of 30 nights
    (17296.25 ms), threshold 101.48%; night 31: improved, two consecutive nights (-73.71%, -73.51%). On the last
    night, 11 after the step, the noise is the new level's own (3.21%; the 12 pushes at the new level: 3.1%
    log-sd), not the 23% of the old level nor the mixture's."""
    s, n = load("cnn_cold_fall"), nights("cnn_cold_fall")
    step, second, last = n[s.jump - 1], n[s.jump], n[-1]
    assert step.verdict is Verdict.SUSPECT_IMPROVED, step.note
    assert step.worse_pct == pytest.approx(-73.71, abs=0.01) and step.threshold_pct == pytest.approx(101.48, abs=0.01)
    assert second.verdict is Verdict.IMPROVED and "two consecutive nights" in (second.note or ""), second.note
    assert second.worse_pct == pytest.approx(-73.51, abs=0.01)
    own = log_sd_pct(s.values[s.jump:])
    assert last.figures is not None and last.figures.noise_pct is not None
    assert last.figures.noise_pct == pytest.approx(3.21, abs=0.01) and last.figures.noise_pct < 2 * own


@pytest.mark.xfail(strict=True, reason=(
    "finding: a real 2.65x regression on a bimodal 43.9%-noise series (sina LastVisualChange cold, alert 190485, "
    "+179.35%, TP) is never flagged: 'unmeasurable' every night, +165.98% worse vs threshold 281.88% (noise "
    "44.66% x k=3) on the step night, +99.59% vs 306.24% the next; the unflagged new-level nights then enter the "
    "noise model (44.66% -> 68.29% after 11 more nights, threshold 675.88%). Outside the item's 25% / 6.7x; not "
    "tuned here"))
def test_the_noisy_bimodal_sina_regression_is_flagged_within_two_nights() -> None:
    """A3, the noise match (the only >= 2x regression of the pool with broad noise at a valid alert): sina
    LastVisualChange (cold, a51), 30 pushes alternating between two process levels (~3500 and ~8000 ms, 43.9%
    log-sd), then the same sina change of 2024-02-28 (alert 190485: +179.35%, reassigned, TP): ~18000 ms, 2.65x.
    Measured: every night from the step on is 'unmeasurable' (step night +165.98% worse vs the median of 30
    nights, 6748.07 ms, threshold 281.88% from noise 44.66%; next night +99.59% vs 306.24%); no suspect, so the
    new level enters the noise model and the series goes blind (noise 68.29%, threshold 675.88% on the last
    night)."""
    s, n = load("sina_cold_bimodal"), nights("sina_cold_bimodal")
    step, second, last = n[s.jump - 1], n[s.jump], n[-1]
    assert step.verdict is Verdict.SUSPECT, (step.verdict, step.worse_pct, step.threshold_pct, step.note)
    assert second.verdict in (Verdict.REGRESSION, Verdict.SEVERE), (second.verdict, second.note)
    own = log_sd_pct(s.values[s.jump:])
    assert last.figures is not None and last.figures.noise_pct is not None and last.figures.noise_pct < 2 * own


@pytest.mark.parametrize("name", CONTROLS)
def test_a_control_of_the_same_noise_is_never_confirmed(name: str) -> None:
    """Controls: 45 pushes of real ~21% noise (log-sd), no step over 15% and no alert in the window. Every night
    is unchanged, unmeasurable (40-41 of 44: noise 19-28% x k=3 hides a 5% change; thresholds 76-134%) or an
    early unconfirmed suspect; never a confirmed verdict."""
    assert not [(i, j.verdict, j.note) for i, j in enumerate(nights(name), start=1) if j.verdict in CONFIRMED]
    assert sum(j.verdict is Verdict.UNMEASURABLE for j in nights(name)) >= 40
