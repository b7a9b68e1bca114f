from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
from report_factories import comparison

from zlops.model import CompareSummary, HistoryPoint, Verdict
from zlops.report import trend_plot
from zlops.report.plots import DPI, FIGSIZE, VERDICT_COLOURS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WIDTH, HEIGHT = round(FIGSIZE[0] * DPI), round(FIGSIZE[1] * DPI)


def _pixels(path: Path):  # -> numpy array (H, W, 3|4)
    from matplotlib import image
    return image.imread(path)


def _check_png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert 10_000 < path.stat().st_size < 400_000
    assert _pixels(path).shape[:2] == (HEIGHT, WIDTH)


def test_regression_plot(summary: CompareSummary, history: list[HistoryPoint], tmp_path: Path) -> None:
    before = copy.deepcopy(history)
    out = trend_plot(history, summary.comparisons[0], tmp_path / "plots" / "matmul.png")
    assert out == tmp_path / "plots" / "matmul.png"
    _check_png(out)
    assert history == before


def test_single_point_history_and_new_and_missing_series(
        summary: CompareSummary, history: list[HistoryPoint], tmp_path: Path) -> None:
    by_case = {c.case: c for c in summary.comparisons}
    _check_png(trend_plot(history[:1], by_case["matmul_bf16"], tmp_path / "one.png"))
    _check_png(trend_plot([], by_case["conv2d"], tmp_path / "new.png", title="brand new"))
    _check_png(trend_plot([], by_case["attention"], tmp_path / "missing.png"))


def _colour_pixels(path: Path, hex_colour: str) -> int:
    import numpy as np
    rgb = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    img = _pixels(path)[..., :3]
    return int((np.abs(img - rgb).max(axis=-1) < 0.02).sum())


@pytest.mark.parametrize("verdict", [Verdict.REGRESSION, Verdict.POTENTIAL, Verdict.IMPROVED])
def test_tonight_is_coloured_by_verdict(verdict: Verdict, history: list[HistoryPoint],
                                        tmp_path: Path) -> None:
    c = comparison("npu", "matmul_bf16", verdict, 1240.0, 1300.0)
    out = trend_plot(history, c, tmp_path / f"{verdict.value}.png")
    assert _colour_pixels(out, VERDICT_COLOURS[verdict]) > 50
    others = {v for v in (Verdict.REGRESSION, Verdict.POTENTIAL, Verdict.IMPROVED) if v is not verdict}
    assert all(_colour_pixels(out, VERDICT_COLOURS[v]) == 0 for v in others)


def test_history_in_another_unit_is_converted(history: list[HistoryPoint], tmp_path: Path) -> None:
    import numpy as np
    c = comparison("npu", "matmul_bf16", Verdict.POTENTIAL, 1.24, 1.27, unit="ms")
    in_ms = [dataclasses.replace(p, unit="ms", samples=tuple(v / 1000 for v in p.samples)) for p in history]
    converted = trend_plot(history, c, tmp_path / "from_us.png")
    native = trend_plot(in_ms, c, tmp_path / "native.png")
    # equal up to one level of anti-aliasing (the converted floats differ in the last bit)
    assert np.abs(_pixels(converted) - _pixels(native)).max() <= 1 / 255 + 1e-6
    wrong = trend_plot(history[:3] + in_ms[3:], comparison("npu", "matmul_bf16", Verdict.POTENTIAL, 1240.0,
                                                           1270.0, unit="us"), tmp_path / "wrong.png")
    assert (np.abs(_pixels(wrong) - _pixels(native)) > 0.1).sum() > 1000


def test_history_in_an_unconvertible_unit_is_refused(history: list[HistoryPoint], tmp_path: Path) -> None:
    c = comparison("npu", "matmul_bf16", Verdict.UNCHANGED, 900.0, 905.0, unit="GB/s")
    with pytest.raises(ValueError, match=r"nightly-0201 is in 'us', the series in 'GB/s'"):
        trend_plot(history, c, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_long_history_thins_tick_labels(history: list[HistoryPoint], tmp_path: Path) -> None:
    long = [dataclasses.replace(history[i % len(history)], run_key=f"n{i}") for i in range(60)]
    _check_png(trend_plot(long, comparison("npu", "m", Verdict.UNCHANGED, 1240.0, 1241.0),
                          tmp_path / "long.png"))


def test_tonight_s_legend_names_the_numbers_its_change_comes_from() -> None:
    """Seen on the 2xH200 campaign proof (night 3): the dot was tonight's 0.03174 eff against a 0.06273
    baseline line, but the legend printed the A/B's -50.66% (0.06543 -> 0.03229 over 8 runs), which no
    number on the plot gave. The legend now says which two numbers the change is between."""
    from zlops.model import Figures, Judgement
    from zlops.report.plots import tonight_label

    plain = comparison("npu", "matmul_bf16", Verdict.REGRESSION, 1240.0, 1608.0)
    assert tonight_label(plain) == "HEAD: 1608 us (regression, +29.68%)"
    ab = Figures(reference=0.06543, reference_label="A/B base, 8 runs", value=0.03229, value_label="A/B head, 8 runs",
                 lower_is_better=False, unit="eff")
    c = dataclasses.replace(comparison("h200", "allreduce/64MiB/tree/nccl", Verdict.SEVERE, 0.06273, 0.03174,
                                       metric="efficiency_p2", unit="eff", lower_is_better=False),
                            judgement=Judgement(Verdict.SEVERE, ab.change_pct, -ab.change_pct, 3.0, figures=ab))
    label = tonight_label(c)
    assert label.startswith("HEAD: 0.03174 eff tonight\nsevere, -50.65%: A/B base, 8 runs 0.06543 eff -> ")
    assert label.endswith("A/B head, 8 runs 0.03229 eff")
