"""benchmarks/flaggems_h200_stats.py: the level split on known values, and the report on the recorded data."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("flaggems_h200_stats", ROOT / "benchmarks" / "flaggems_h200_stats.py")
assert _spec is not None and _spec.loader is not None
stats = importlib.util.module_from_spec(_spec)
sys.modules["flaggems_h200_stats"] = stats
_spec.loader.exec_module(stats)


def test_two_levels_are_found_with_their_shares() -> None:
    lv = stats.split_levels([0.045, 0.047, 0.046, 0.094, 0.048, 0.093], gap=1.25, min_share=0.2)
    assert lv is not None and lv.low == pytest.approx(0.0465) and lv.high == pytest.approx(0.0935)
    assert lv.ratio == pytest.approx(2.01, abs=0.01) and lv.low_share == pytest.approx(4 / 6)


def test_a_lone_outlier_or_a_tight_series_is_one_level() -> None:
    assert stats.split_levels([1.0, 1.01, 0.99, 1.0, 3.0], gap=1.25, min_share=0.3) is None
    assert stats.split_levels([1.0636, 1.0640, 1.0653, 1.0648], gap=1.25, min_share=0.2) is None
    assert stats.robust_cv_pct([1.0, 1.0, 1.0]) == 0.0


def test_the_report_on_the_recorded_h200_data(capsys: pytest.CaptureFixture[str]) -> None:
    assert stats.main([]) == 0
    out = capsys.readouterr().out
    assert "abs/float16/(1024x1024x1024)       C/A median ratio  2.00  C's range clears A's" in out
    assert "bimodal" in out and "sum/float16/(4096x4096, 1)" in out
    assert "02_inrun3_r2_A.log   sum/float16/(4096x4096, 1)" in out
