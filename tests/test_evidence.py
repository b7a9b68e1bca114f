"""zlops.judge.evidence.series_histories: what the judge reads of a series' past (issue 22's night rules).

A synthetic window of nights (the columns :meth:`Store.history_frame` gives) and the stored verdicts of
those nights (:meth:`Store.verdict_evidence`, ``only_evidence``): unresolved suspects stay out of the
history and of the process runs, a confirmed change restarts both.
"""

from __future__ import annotations

import pandas as pd
import pytest

from zlops.judge.evidence import series_histories
from zlops.model import Figures, Verdict

KEY = ("p", "op/case", "latency")


def _frame(medians: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"pool": KEY[0], "case": KEY[1], "metric": KEY[2],
                         "run_key": [f"n{i}" for i in range(len(medians))], "median": medians})


def _ev(**verdicts: Verdict | tuple[Verdict, Figures]) -> dict:
    out = {}
    for night, v in verdicts.items():
        verdict, figures = v if isinstance(v, tuple) else (v, None)
        out[(night, *KEY)] = (verdict, figures)
    return out


def _ab(base: tuple[float, ...], head: tuple[float, ...]) -> Figures:
    return Figures(1.0, "A/B base", 1.0, "A/B head", runs_base=base, runs_head=head)


NIGHTS = [10.0, 10.1, 9.9, 10.0, 10.05, 9.95, 12.0, 12.1, 12.05]


def test_a_run_of_unresolved_suspects_stays_out_but_the_newest() -> None:
    """Nights 6-8 stepped +20% and are stored suspects (an A/B that could not decide, process levels not
    known): 6 and 7 stay out; 8 stays in for the judge to re-judge against nights 0-5 and hold out."""
    history, processes, settled = series_histories(_frame(NIGHTS), {KEY}, evidence=_ev(
        n6=Verdict.SUSPECT, n7=(Verdict.SUSPECT, _ab((10.0, 10.02), (12.0, 12.1))), n8=Verdict.SUSPECT))
    assert list(history[KEY]) == [*NIGHTS[:6], 12.05]
    assert processes[KEY] == [] and not settled     # an A/B that could not decide is no evidence yet


def test_a_resolved_suspect_is_history_again() -> None:
    # night 7 came back: night 6 was noise (resolved), and belongs in the noise model
    nights = [*NIGHTS[:7], 10.0, 12.0]
    history, _, settled = series_histories(_frame(nights), {KEY}, evidence=_ev(n6=Verdict.SUSPECT,
                                                                                n8=Verdict.SUSPECT))
    assert list(history[KEY]) == nights and not settled
    # a suspect the other way ends the run too; an A/B that cleared a suspect stored it unchanged
    history, processes, _ = series_histories(_frame(NIGHTS), {KEY}, evidence=_ev(
        n6=Verdict.SUSPECT_IMPROVED, n7=(Verdict.UNCHANGED, _ab((10.0, 10.2), (10.1, 9.9))), n8=Verdict.SUSPECT))
    level = 10.05   # the median of the nights kept: each side's runs about their own median, at that level
    assert list(history[KEY]) == NIGHTS
    assert processes[KEY] == pytest.approx([10.0 / 10.1 * level, 10.2 / 10.1 * level, 10.1 / 10.0 * level,
                                            9.9 / 10.0 * level])


def test_a_last_night_an_ab_settled_is_not_re_judged_a_suspect() -> None:
    """Issue 22 on the H200 hold-out replay: a night whose A/B found process levels (stored unmeasurable)
    or cleared it is settled: the judge must not re-judge it a suspect and confirm tonight with it."""
    for verdict in (Verdict.UNMEASURABLE, Verdict.UNCHANGED):
        _, _, settled = series_histories(_frame(NIGHTS), {KEY}, evidence=_ev(
            n8=(verdict, _ab((10.0, 10.01), (12.0, 12.02)))))
        assert settled == {KEY}
    _, _, settled = series_histories(_frame(NIGHTS), {KEY}, evidence={})
    assert settled == {KEY}                         # no stored row that night: not a suspect
    _, _, settled = series_histories(_frame(NIGHTS), {KEY})
    assert not settled                              # no stored verdicts at all: the judge re-judges


def test_a_confirmed_change_restarts_the_history_and_its_processes() -> None:
    """Confirmed on night 7 (second suspect night): the window restarts there, the suspect night 6
    before it is gone with the old level, and only the A/B's head runs are processes at the new level."""
    history, processes, _ = series_histories(_frame(NIGHTS), {KEY}, evidence=_ev(
        n6=Verdict.SUSPECT, n7=(Verdict.SEVERE, _ab((10.0, 10.01), (12.0, 12.02)))))
    level = (12.1 + 12.05) / 2
    assert list(history[KEY]) == NIGHTS[7:]
    assert processes[KEY] == pytest.approx([12.0 / 12.01 * level, 12.02 / 12.01 * level])
    history, _, _ = series_histories(_frame(NIGHTS), {KEY}, evidence=_ev(n6=Verdict.SUSPECT, n7=Verdict.IMPROVED,
                                                                         n8=Verdict.SUSPECT))
    assert list(history[KEY]) == NIGHTS[7:]


def _frame_shas(medians: list[float], shas: list[str]) -> pd.DataFrame:
    frame = _frame(medians)
    return frame.assign(sha=shas, unit="ms", n=1)


def test_the_suspect_run_names_its_onset_commit_and_whether_an_ab_of_it_could_not_decide() -> None:
    """Issue 22, hold-out 5 on the H200. Lease 5: a move on nights 7-8 of the commit night 6 ran (onset = base
    commit: no code change). Lease 6: a suspect whose A/B on its first night was inconclusive. Both are held from
    the nights' rule (zlops.stats.decide's hold), each with its reason; a suspect run with neither is not."""
    from zlops.judge.evidence import hold_reasons
    from zlops.stats.decide import AB_UNDECIDED_PENDING, SAME_CODE_PENDING

    shas = ["a"] * 6 + ["w"] * 3
    before: dict = {}
    onset: dict = {}
    tried: set = set()
    series_histories(_frame_shas(NIGHTS, shas), {KEY}, evidence=_ev(n6=Verdict.SUSPECT, n7=Verdict.SUSPECT,
                                                                    n8=Verdict.SUSPECT),
                     before_pending=before, pending_onset=onset, pending_ab=tried)
    assert before[KEY].run_key == "n5" and before[KEY].sha == "a" and onset[KEY] == "w" and not tried
    assert hold_reasons(before, onset, set(), tried) == {}                      # a code change: nights may confirm
    shas_same = ["a"] * 9                                                        # the move on the base's own commit
    before, onset, tried = {}, {}, set()
    series_histories(_frame_shas(NIGHTS, shas_same), {KEY}, evidence=_ev(n6=Verdict.SUSPECT, n7=Verdict.SUSPECT,
                                                                         n8=Verdict.SUSPECT),
                     before_pending=before, pending_onset=onset, pending_ab=tried)
    assert (before[KEY].sha, onset[KEY]) == ("a", "a")
    assert hold_reasons(before, onset, {("a", "a")}, tried) == {KEY: SAME_CODE_PENDING}
    before, onset, tried = {}, {}, set()
    series_histories(_frame_shas(NIGHTS, shas), {KEY}, evidence=_ev(
        n6=(Verdict.SUSPECT, _ab((10.0, 10.02), (12.0, 12.1))), n7=Verdict.SUSPECT, n8=Verdict.SUSPECT),
        before_pending=before, pending_onset=onset, pending_ab=tried)
    assert tried == {KEY} and hold_reasons(before, onset, set(), tried) == {KEY: AB_UNDECIDED_PENDING}
    # an A/B before the run (it cleared a night that is history now) holds nothing
    before, onset, tried = {}, {}, set()
    series_histories(_frame_shas(NIGHTS, shas), {KEY}, evidence=_ev(
        n4=(Verdict.UNCHANGED, _ab((10.0, 10.02), (10.0, 10.1))), n7=Verdict.SUSPECT, n8=Verdict.SUSPECT),
        before_pending=before, pending_onset=onset, pending_ab=tried)
    assert not tried and hold_reasons(before, onset, set(), tried) == {}


def test_ab_runs_of_drifting_nights_are_process_evidence_not_process_levels() -> None:
    """Two nights' A/Bs of unchanged code, the machine at 0.96 one night and 1.05 the next, each A/B's runs within
    0.1%: pooled raw they read as two process levels 9% apart (and the series became "bimodal 0.96/1.05:
    unmeasurable" for good); each side about its own median they are one level, and the A/B noise is 0.1%."""
    from zlops.stats.noise import ab_noise_pct
    from zlops.stats.noise import detect_modes

    nights = [1.0, 1.05, 0.96, 1.03, 0.97, 0.96, 1.05]
    ab0 = _ab((0.9599, 0.9601, 0.96), (0.96, 0.9602, 0.9598))
    ab1 = _ab((1.0499, 1.05, 1.0501), (1.0502, 1.05, 1.0498))
    noise: dict = {}
    _, processes, _ = series_histories(_frame(nights), {KEY}, ab_noise=noise, evidence=_ev(
        n5=(Verdict.UNCHANGED, ab0), n6=(Verdict.UNCHANGED, ab1)))
    assert len(processes[KEY]) == 12
    assert detect_modes(processes[KEY], floor_pct=2.0, k=3.0, ordered=False) is None
    assert detect_modes([*ab0.runs_base, *ab0.runs_head, *ab1.runs_base, *ab1.runs_head], floor_pct=2.0, k=3.0,
                        ordered=False) is not None   # what the raw runs said
    assert noise[KEY] == pytest.approx(ab_noise_pct([ab0.runs_base, ab0.runs_head, ab1.runs_base, ab1.runs_head]))
    assert noise[KEY] < 0.05
