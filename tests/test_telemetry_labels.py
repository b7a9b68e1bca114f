"""Telemetry names per backend: a CPU pool's clock is the CPU's, never an "SM clock" (issue 12, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.figure import Figure

from zlops.backends.clocks import clock_axis_label, clock_label, clock_name
from zlops.model import BaselinePoint, Comparison, HistoryPoint, Judgement, Summary, Verdict
from zlops.report.figures import telemetry_timeline
from zlops.report.markdown import telemetry_line
from zlops.report.night_figures import draw_run_figures
from zlops.report.plots import trend_plot


@pytest.mark.parametrize(("backend", "name"), [("cpu", "CPU"), ("cuda", "SM"), ("nvidia", "SM"), ("musa", "SM"),
                                               ("rocm", "SM"), ("ascend", "AI Core"), ("npu", "AI Core"),
                                               (None, "device"), ("quantum", "device")])
def test_one_registry_names_the_clock_of_every_backend(backend: str | None, name: str) -> None:
    assert clock_name(backend) == name
    assert clock_label(backend) == f"{name} clock"
    assert clock_axis_label(backend) == f"{name} MHz"


SUMMARY = {"samples": 12, "sm_clock_median_mhz": 2596.0, "sm_clock_min_mhz": 2400.0, "below_90pct_peak_share": 0.0}


def test_the_report_line_names_the_pool_s_clock() -> None:
    assert telemetry_line({**SUMMARY, "backend": "cpu"}).startswith("CPU clock 2596 MHz median, 2400 min")
    assert telemetry_line({**SUMMARY, "backend": "cuda"}).startswith("SM clock 2596 MHz median")
    assert telemetry_line({**SUMMARY, "backend": "ascend"}).startswith("AI Core clock 2596 MHz median")
    assert "SM" not in telemetry_line(SUMMARY)  # an old summary without its backend claims no clock it cannot know


@pytest.fixture
def ylabels(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The y-axis labels of every figure saved during the test (the PNG itself cannot be read back)."""
    seen: list[list[str]] = []
    save = Figure.savefig

    def spy(fig: Figure, *args: object, **kwargs: object) -> object:
        seen.append([ax.get_ylabel() for ax in fig.axes])
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    return seen


def _comparison() -> Comparison:
    return Comparison("s", "cpu", "softmax", "time", "ms", True, BaselinePoint("r0", "a" * 40, "ms", 1.0, 2),
                      Summary(1.1, 2), Judgement(Verdict.REGRESSION, 10.0, 10.0, 2.0))


def test_figures_name_the_clock_they_are_given(tmp_path: Path, ylabels: list[list[str]]) -> None:
    from datetime import datetime, timezone

    history = [HistoryPoint(f"r{i}", f"{i:040x}", datetime(2026, 11, i + 1, tzinfo=timezone.utc), "ms", (1.0,))
               for i in range(3)]
    trend_plot(history, _comparison(), tmp_path / "t.png", telemetry=[(2596.0, None)] * 4,
               clock_label=clock_axis_label("cpu"))
    rows = [{"timestamp": f"2026-11-30T01:00:0{i}+00:00", "index": 0, "sm_clock_mhz": 2596.0 + i} for i in range(3)]
    telemetry_timeline(rows, tmp_path / "tl.png", title="cpu / device 0", clock_label=f"{clock_label('cpu')} (MHz)")
    labels = [label for fig in ylabels for label in fig]
    assert "CPU MHz" in labels and "CPU clock (MHz)" in labels
    assert not any("SM" in label for label in labels)


def test_run_figures_take_the_clock_name_from_the_shard_backend(tmp_path: Path, ylabels: list[list[str]]) -> None:
    """draw_run_figures, as the report step calls it, on a CPU shard with a real telemetry.csv."""
    from datetime import datetime, timezone

    from zlops.model import CompareSummary, ShardOutcome, ShardStatus

    shard_dir = tmp_path / "cpu" / "0"
    shard_dir.mkdir(parents=True)
    (shard_dir / "telemetry.csv").write_text(
        "timestamp,index,sm_clock_mhz,mem_clock_mhz,temp_c,power_w,util_pct,mem_used_mib\n"
        "2026-11-30T01:00:01+00:00,0,2596,,,,97,1024\n2026-11-30T01:00:02+00:00,0,2601,,,,98,1024\n")
    now = datetime(2026, 11, 30, tzinfo=timezone.utc)
    shard = ShardOutcome("cpu", 0, "cpu", ShardStatus.OK, shard_dir, 0, now, now)

    class NoHistory:  # the store surface draw_run_figures reads
        def series_histories(self, *a: object, **k: object) -> dict[object, list[HistoryPoint]]:
            return {}

        def run_telemetry(self, run_keys: list[str]) -> dict[str, dict[tuple[str, int], dict[str, object]]]:
            return {key: {("cpu", 0): {"telemetry": {"sm_clock_median_mhz": 2598.0}}} for key in run_keys}

        def results(self, run_key: str) -> list[object]:
            return []

        def run_samples(self, run_key: str, *a: object, **k: object) -> dict[object, tuple[float, ...]]:
            return {}

    draw_run_figures(NoHistory(), run_key="r1", suite="s",  # type: ignore[arg-type]
                     summary=CompareSummary("r1", "s", "b" * 40, (_comparison(),)), shards=[shard],
                     out_dir=tmp_path / "plots", band_pct=2.0)
    labels = [label for fig in ylabels for label in fig]
    assert "CPU MHz" in labels and "CPU clock (MHz)" in labels
    assert not any("SM" in label for label in labels)
