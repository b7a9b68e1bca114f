"""Run-level figures and the trend's telemetry strip: real PNGs, checked for size, shape and drawn content.

Inputs are real where the repository has them: the H200 telemetry.csv of docs/evidence, simpler's
recorded rounds table (tests/data/simpler). Strong scaling uses the collectives parser's params shape.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from report_factories import comparison

from zlops.formats import parse_results
from zlops.host.telemetry import read_csv
from zlops.model import CaseResult, Comparison, HistoryPoint, Summary, Verdict
from zlops.report.figures import (
    BASE_COLOUR,
    DPI,
    HEAD_COLOUR,
    PhaseRow,
    cost_ratio,
    phase_breakdown,
    phase_rows,
    ratio_chart,
    scaling_points,
    strong_scaling,
    telemetry_timeline,
)
from zlops.report.plots import CLOCK_COLOUR, REFERENCE_COLOUR, TEMP_COLOUR, VERDICT_COLOURS, trend_plot

ROOT = Path(__file__).resolve().parents[2]
H200_TELEMETRY = ROOT / "docs" / "evidence" / "h200" / "night2_telemetry.csv"
SIMPLER = ROOT / "tests" / "data" / "simpler" / "benchmark_bgemm_Case0_summary.log"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _pixels(path: Path) -> np.ndarray:
    from matplotlib import image

    return image.imread(path)[..., :3]


def check_png(path: Path | None, *, width_in: float = 8.0, height_in: float | None = 4.5) -> np.ndarray:
    """A real PNG of the expected pixel size and a sane file size; returns its pixels."""
    assert path is not None and path.read_bytes()[:8] == PNG_MAGIC
    assert 15_000 < path.stat().st_size < 400_000
    img = _pixels(path)
    assert img.shape[1] == round(width_in * DPI)
    if height_in is not None:
        assert img.shape[0] == round(height_in * DPI)
    assert (img < 0.95).any(axis=-1).mean() > 0.02  # something is drawn, not a blank page
    return img


def colour_pixels(img: np.ndarray, hex_colour: str, tol: float = 0.02) -> int:
    rgb = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return int((np.abs(img - rgb).max(axis=-1) < tol).sum())


def test_ratio_chart_names_few_cases_and_colours_them_by_verdict(tmp_path: Path) -> None:
    rows = [comparison("npu", "matmul_bf16", Verdict.REGRESSION, 1240.0, 1607.8),
            comparison("npu", "add_fp32", Verdict.IMPROVED, 890.3, 850.0),
            comparison("npu", "softmax", Verdict.UNCHANGED, 480.0, 481.0),
            comparison("npu", "conv2d", Verdict.NEW, None, 3.25)]
    img = check_png(ratio_chart(rows, tmp_path / "ratio.png", band_pct=2.0))
    assert colour_pixels(img, VERDICT_COLOURS[Verdict.REGRESSION]) > 2000  # the +30% bar is long
    assert colour_pixels(img, VERDICT_COLOURS[Verdict.IMPROVED]) > 200
    assert colour_pixels(img, VERDICT_COLOURS[Verdict.POTENTIAL]) == 0
    assert ratio_chart(rows[3:], tmp_path / "none.png", band_pct=2.0) is None
    assert not (tmp_path / "none.png").exists()


def test_ratio_chart_of_many_cases_and_the_direction_of_throughput(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    rows = [comparison("npu", f"abs/float16/({i}x64)", Verdict.UNCHANGED, 100.0, 100.0 * (1 + rng.normal(0, 0.005)))
            for i in range(300)]
    rows[5] = comparison("npu", "abs/float16/(5x64)", Verdict.REGRESSION, 100.0, 109.0)
    img = check_png(ratio_chart(rows, tmp_path / "many.png", band_pct=2.0))
    assert colour_pixels(img, VERDICT_COLOURS[Verdict.REGRESSION]) > 20
    bw = comparison("npu", "copy", Verdict.REGRESSION, 900.0, 800.0, metric="bandwidth", unit="GB/s",
                    lower_is_better=False)
    assert cost_ratio(bw) == pytest.approx(1.125)  # less throughput is worse: > 1


def test_phase_breakdown_from_simpler_rounds(tmp_path: Path) -> None:
    results = parse_results("simpler-rounds-table", SIMPLER)
    assert {r.metric for r in results} == {"host", "device", "effective", "orch", "sched"}
    rows: list[Comparison] = []
    for r in results:  # tonight: orch and sched 12% slower than the recorded baseline, the rest unchanged
        factor = 1.12 if r.metric in ("orch", "sched") else 1.0
        rows.append(comparison("a2a3", r.case, Verdict.UNCHANGED, r.median, r.median * factor, metric=r.metric))
    (row,) = phase_rows(rows)
    assert set(row.head) == {"host", "device", "effective", "orch", "sched"} and row.base is not None
    out = phase_breakdown([row], tmp_path / "phases.png")
    img = check_png(out, height_in=None)
    assert img.shape[0] == round((1.6 + 1.7) * DPI)
    assert colour_pixels(img, HEAD_COLOUR) > 2000 and colour_pixels(img, BASE_COLOUR) > 2000
    assert colour_pixels(img, "#d62728") > 30  # the +12.0% labels of orch and sched are red
    assert phase_rows([comparison("npu", "x", Verdict.UNCHANGED, 1.0, 1.0)]) == []
    assert phase_breakdown([], tmp_path / "none.png") is None


def test_phase_breakdown_shows_the_cases_that_moved_most(tmp_path: Path) -> None:
    rows = [PhaseRow("a2a3", f"case{i}", {"host": 100.0, "device": 10.0}, {"host": 100.0, "device": 10.0 + i})
            for i in range(7)]
    img = check_png(phase_breakdown(rows, tmp_path / "p.png"), height_in=None)
    assert img.shape[0] == round((1.6 + 1.7 * 4) * DPI)  # four cases, not seven


def _collective(stack: str, p: int, seconds: float) -> tuple[str, int, CaseResult]:
    # the shape zlops.formats.collectives gives a results.json run
    params = {"stack": stack, "variant": "mesh", "p": p, "count": 65536, "dtype": "fp32", "raw": False}
    return ("a2a3", 0, CaseResult(case=f"mesh_p{p}_count65536_fp32_a2a3/{stack}", metric="execute_s", unit="s",
                                  lower_is_better=True, samples=(seconds,), params=params))


def test_strong_scaling_lines_per_stack_with_the_baseline_dashed(tmp_path: Path) -> None:
    results = [_collective(s, p, 0.004 / p ** 0.8 * (1.3 if s == "simpler" else 1.0))
               for s in ("hccl", "simpler") for p in (2, 4, 8)]
    base = [comparison("a2a3", r.case, Verdict.UNCHANGED, r.median * 0.95, r.median, metric="execute_s", unit="s")
            for _, _, r in results]
    points = scaling_points(results, base)
    assert [(pt.line, pt.p) for pt in points][:3] == [("a2a3: hccl mesh count=65536 fp32", 2),
                                                       ("a2a3: hccl mesh count=65536 fp32", 4),
                                                       ("a2a3: hccl mesh count=65536 fp32", 8)]
    assert points[0].base == pytest.approx(points[0].value * 0.95)
    img = check_png(strong_scaling(points, tmp_path / "scaling.png"))
    assert colour_pixels(img, "#1f77b4", tol=0.05) > 300 and colour_pixels(img, "#ff7f0e", tol=0.05) > 300


def test_strong_scaling_is_skipped_without_device_counts(tmp_path: Path) -> None:
    plain = [("local", 0, CaseResult("alpha", "time", "ms", True, (1.0,)))]
    assert scaling_points(plain, []) == []
    one_p = scaling_points([_collective("hccl", 2, 0.001)], [])
    assert len(one_p) == 1 and strong_scaling(one_p, tmp_path / "s.png") is None
    assert not (tmp_path / "s.png").exists()


def test_telemetry_timeline_of_a_real_h200_shard(tmp_path: Path) -> None:
    rows = read_csv(H200_TELEMETRY)
    assert len(rows) == 9
    img = check_png(telemetry_timeline(rows, tmp_path / "t.png", title="h200 / device 0"), height_in=None)
    assert img.shape[0] == round((1.4 + 1.3 * 3) * DPI)  # clock, temperature and power panels
    for colour in ("#1f77b4", "#d62728", "#ff7f0e"):
        assert colour_pixels(img, colour, tol=0.05) > 150
    no_power = [{k: v for k, v in r.items() if k != "power_w"} for r in rows]
    img = check_png(telemetry_timeline(no_power, tmp_path / "t2.png", title="x"), height_in=None)
    assert img.shape[0] == round((1.4 + 1.3 * 2) * DPI) and colour_pixels(img, "#ff7f0e", tol=0.05) < 20
    assert telemetry_timeline([{"timestamp": "x", "index": 0}], tmp_path / "t3.png", title="x") is None
    assert telemetry_timeline(rows[:1], tmp_path / "t4.png", title="one sample is not a timeline") is None


def test_trend_with_the_telemetry_strip(history: list[HistoryPoint], tmp_path: Path) -> None:
    c = comparison("npu", "softmax_8192", Verdict.REGRESSION, 1240.0, 1330.0)
    nights = [(1980.0, 45.0 + i) for i in range(len(history))] + [(1750.0, 71.0)]
    nights[3] = (None, None)  # a night without telemetry leaves a gap, not an error
    img = check_png(trend_plot(history, c, tmp_path / "trend.png", telemetry=nights), height_in=4.5 + 1.6)
    assert colour_pixels(img, CLOCK_COLOUR) > 100 and colour_pixels(img, TEMP_COLOUR) > 100
    assert colour_pixels(img, VERDICT_COLOURS[Verdict.REGRESSION]) > 50
    plain = check_png(trend_plot(history, c, tmp_path / "plain.png", telemetry=[(None, None)] * 11))
    assert colour_pixels(plain, CLOCK_COLOUR) == 0
    fixed = dataclasses.replace(c, judgement=dataclasses.replace(c.judgement, verdict=Verdict.IMPROVED))
    img = check_png(trend_plot(history, fixed, tmp_path / "ref.png", reference=(1.24, "ms", "alert #3 reference")))
    assert colour_pixels(img, REFERENCE_COLOUR) > 200  # the open alert's own reference, converted from ms
    with pytest.raises(ValueError, match="alert #3 reference is in 'GB/s'"):
        trend_plot(history, fixed, tmp_path / "bad.png", reference=(1.0, "GB/s", "alert #3 reference"))
    cpu = [(2596.0, None)] * 11  # a CPU pool: a clock, no temperature, so no temperature axis
    img = check_png(trend_plot(history, c, tmp_path / "cpu.png", telemetry=cpu), height_in=4.5 + 1.6)
    assert colour_pixels(img, CLOCK_COLOUR) > 100 and colour_pixels(img, TEMP_COLOUR) == 0


def test_figures_leave_their_inputs_alone(tmp_path: Path) -> None:
    rows = [comparison("npu", "a", Verdict.REGRESSION, 1.0, 1.1)]
    before = [dataclasses.replace(r) for r in rows]
    ratio_chart(rows, tmp_path / "r.png", band_pct=2.0)
    assert rows == before


def test_a_big_night_draws_a_bounded_number_of_trends_most_important_first() -> None:
    from zlops.model import BaselinePoint, CompareSummary, Comparison, Judgement, Verdict
    from zlops.report.night_figures import trend_candidates

    def row(case: str, verdict: Verdict, worse: float) -> Comparison:
        return Comparison("s", "p", case, "t", "ms", True, BaselinePoint("r", "a" * 40, "ms", 1.0, 1), Summary(1.1, 1),
                          Judgement(verdict, worse, worse, 2.0))

    rows = [row(f"sus{i}", Verdict.SUSPECT, 3.0 + i) for i in range(500)]
    rows += [row("sev", Verdict.SEVERE, 9.0), row("imp", Verdict.IMPROVED, -4.0), row("ok", Verdict.UNCHANGED, 0.1)]
    summary = CompareSummary("r2", "s", "b" * 40, tuple(rows))
    picked = trend_candidates(summary, {("p", "ok", "t"): (1.0, "ms", "alert")}, limit=5)
    assert [c.case for c in picked] == ["sev", "ok", "imp", "sus499", "sus498"]
