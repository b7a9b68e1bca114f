from __future__ import annotations

import dataclasses
from pathlib import Path

from zlops.model import CompareSummary, RunRecord, ShardOutcome
from zlops.report import markdown_report


def _report(summary: CompareSummary, run: RunRecord, shards: list[ShardOutcome], tmp_path: Path,
            **kwargs: object) -> str:
    root = tmp_path / "artifacts"
    plots = {("npu", "matmul_bf16", "latency"): root / "plots" / "npu matmul_bf16.png"}
    return markdown_report(summary, run=run, shards=shards, plots=plots, artifacts_root=root, **kwargs)


def test_title_and_run_facts(summary: CompareSummary, run: RunRecord, shards: list[ShardOutcome],
                             tmp_path: Path) -> None:
    text = _report(summary, run, shards, tmp_path)
    lines = text.splitlines()
    assert lines[0] == "# kernels @ `2222222`"
    for line in ("- Run: `nightly-0302`", "- Kind: nightly", "- Branch: `main`",
                 "- Baseline: 1111111 -> HEAD: 2222222"):
        assert line in lines


def test_shard_table_has_status_duration_error_and_relative_artifacts(
        summary: CompareSummary, run: RunRecord, shards: list[ShardOutcome], tmp_path: Path) -> None:
    lines = _report(summary, run, shards, tmp_path).splitlines()
    assert "1 of 2 shards ok." in lines
    assert "| cuda | 1 | cuda | **failed** | 12.5 s | CUDA error: out of memory | `cuda-1` |" in lines
    assert "| npu | 0 | ascend | ok | 12m 34s |  | `npu-0` |" in lines


def test_compare_rows_flagged_ones_bold(summary: CompareSummary, run: RunRecord,
                                        shards: list[ShardOutcome], tmp_path: Path) -> None:
    lines = _report(summary, run, shards, tmp_path).splitlines()
    assert ("| **matmul_bf16** | **latency** | **1240 us** | **1608 us** | **+368 us** "
            "| **+29.66%** | **!! REGRESSION** | **baseline 1111111** |") in lines
    assert "| add_fp32 | latency | 890.3 us | 850 us | -40.3 us | -4.53% | improved | baseline 1111111 |" in lines
    assert "| conv2d | latency | - | 3.25 ms | - | - | new | - |" in lines
    assert "| attention | latency | 7 ms | - | - | - | MISSING | baseline 1111111 |" in lines
    assert lines.index("### cuda") < lines.index("### npu")
    assert "**Overall: 1 of 4 cases improved, 2 regressed (5 series judged)**" in lines


def test_flagged_section_links_plots_relative_to_artifacts_root(
        summary: CompareSummary, run: RunRecord, shards: list[ShardOutcome], tmp_path: Path) -> None:
    text = _report(summary, run, shards, tmp_path)
    flagged = text[text.index("## Flagged"):text.index("## Notes")]
    assert flagged.index("### !! REGRESSION: npu / matmul_bf16 (latency)") < flagged.index(
        "### ! potential: cuda / gemm (latency)")
    assert "[![trend of matmul_bf16](plots/npu%20matmul_bf16.png)](plots/npu%20matmul_bf16.png)" in flagged
    assert "+29.66%: 1240 us -> 1608 us (Base = baseline 1111111)." in flagged
    assert "- cuda / attention (latency): in the baseline, no value tonight" in flagged
    assert str(tmp_path) not in text


def test_notes_state_the_thresholds(summary: CompareSummary, run: RunRecord,
                                    shards: list[ShardOutcome], tmp_path: Path) -> None:
    text = _report(summary, run, shards, tmp_path, thresholds=(3.0, 7.5))
    assert "- Potential regression (flagged, `! potential`): worse by more than 3%." in text
    assert "worse by more than 7.5%." in text
    # the noise judge's regression is a confirmed change beyond potential_pct, severe beyond regression_pct
    noise = markdown_report(summary, run=run, shards=shards, thresholds=(3.0, 7.5), judge="noise")
    assert "- Regression (`!! REGRESSION`): confirmed, worse by more than 3%" in noise
    assert "- Severe (`!!! SEVERE`): confirmed, worse by more than 7.5%." in noise


def test_absolute_paths_without_root_and_pipes_escaped(
        summary: CompareSummary, run: RunRecord, shards: list[ShardOutcome]) -> None:
    odd = dataclasses.replace(shards[1], error="bad | thing")
    text = markdown_report(summary, run=run, shards=[shards[0], odd])
    assert f"`{shards[0].artifact_dir.as_posix()}`" in text
    assert "bad \\| thing" in text
    assert "![trend" not in text


def test_nothing_flagged(run: RunRecord) -> None:
    text = markdown_report(CompareSummary("r", "kernels", run.sha, ()), run=run, shards=[])
    assert "Nothing flagged." in text
    assert "No comparisons." in text
    assert "0 of 0 shards ok." in text


def test_telemetry_is_shown_per_shard_and_next_to_flagged_deltas(summary: CompareSummary, run: RunRecord,
                                                                  shards: list[ShardOutcome]) -> None:
    telemetry = {("npu", 0): {"backend": "cuda", "samples": 9, "busy_samples": 4, "sm_clock_median_mhz": 1980.0,
                              "sm_clock_min_mhz": 1950.0, "below_90pct_peak_share": 0.0, "temp_max_c": 49.0,
                              "power_mean_w": 219.2}}
    text = markdown_report(summary, run=run, shards=shards, telemetry=telemetry)
    line = ("SM clock 1980 MHz median, 1950 min, 0% of busy samples below 90% of peak, 49 °C max, 219 W mean "
            "(9 samples)")
    assert "## Telemetry" in text and f"| npu | 0 | {line} |" in text
    flagged = text.split("## Flagged", 1)[1]
    npu_entry = flagged.split("### !! REGRESSION: npu / matmul_bf16", 1)[1].split("###", 1)[0]
    assert f"Telemetry tonight: device 0: {line}" in npu_entry
    cuda_entry = flagged.split("### ! potential: cuda", 1)[1].split("###", 1)[0]
    assert "Telemetry tonight" not in cuda_entry  # no telemetry was recorded for that pool
