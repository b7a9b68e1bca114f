"""`zlops parse --format F FILE [--json]` for every results format added with the harness adapters.

Real recorded files where they exist (tests/data/*/PROVENANCE.md). simpler-benchmark-rounds and
collectives have no real capture: their inputs are SYNTHETIC, built from the documented grammar /
schema (see test_simpler_benchmark_rounds.py and test_collectives.py), around a real rounds table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zlops.cli import main
from zlops.formats import format_names

DATA = Path(__file__).resolve().parents[1] / "data"
RULE = "=" * 64


def _benchmark_rounds(tmp_path: Path) -> Path:
    table = (DATA / "simpler" / "qwen3_14b_decode_StressBatch16Seq3500_summary.log").read_text(encoding="utf-8")
    text = "\n".join(["", "Runtime: tensormap_and_ringbuffer", "", RULE, "  qwen3_14b_decode", RULE,
                      "  ---- StressBatch16Seq3500 [parallel] ----", table.rstrip("\n"), "", RULE,
                      "  Benchmark complete (tensormap_and_ringbuffer): 1 passed, 0 failed (1 total)", RULE]) + "\n"
    path = tmp_path / "benchmark_rounds.out"
    path.write_text(text, encoding="utf-8")
    return path


def _collectives(tmp_path: Path) -> Path:
    rounds = [{"round": 0, "phase": "warmup", "wall_s": 1.2, "execute_s": 0.0021, "ok": True,
               "bw_execute_mb_s": 124.830476, "setup_s": 3.25},
              {"round": 1, "phase": "timed-1", "wall_s": 0.0006, "execute_s": 0.000412, "ok": True,
               "bw_execute_mb_s": 636.271845},
              {"round": 2, "phase": "timed-2", "wall_s": 0.0006, "execute_s": 0.000398, "ok": True,
               "bw_execute_mb_s": 658.653266}]
    path = tmp_path / "cases" / "mesh_p2_count65536_fp32_a2a3_d0-1" / "hccl" / "timing.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rounds, indent=2), encoding="utf-8")
    return path


CASES = {
    # format: (input, first case, first metric, samples of the first row)
    "simpler-strace": (DATA / "simpler" / "qwen3_14b_decode_StressBatch16Seq3500.log",
                       "TestQwen314BDecode::StressBatch16Seq3500", "host", 5),
    "simpler-rounds-table": (DATA / "simpler" / "benchmark_bgemm_Case0_summary.log", "benchmark_bgemm_Case0",
                             "host", 100),
    "simpler-benchmark-rounds": (_benchmark_rounds, "qwen3_14b_decode (StressBatch16Seq3500)", "host", 5),
    "flaggems-record": (DATA / "flaggems" / "result-m_abs-sv--level_core--record_log.log", "abs/float16/(64x64)",
                        "latency", 1),
    "collectives": (_collectives, "mesh_p2_count65536_fp32_a2a3_d0-1/hccl", "execute_s", 2),
    "google-benchmark": (DATA / "google_benchmark" / "repetitions3.json", "sum_list/64", "real_time", 3),
}


def _input(spec: object, tmp_path: Path) -> Path:
    return spec if isinstance(spec, Path) else spec(tmp_path)  # type: ignore[operator]


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_parse_json_prints_the_normalized_rows(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, case, metric, n = CASES[fmt]
    assert main(["--plain", "parse", "--format", fmt, str(_input(spec, tmp_path)), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert (rows[0]["case"], rows[0]["metric"], len(rows[0]["samples"])) == (case, metric, n)
    assert {"unit", "lower_is_better", "params"} <= set(rows[0])


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_parse_text_mode(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, case, metric, n = CASES[fmt]
    assert main(["--plain", "parse", "--format", fmt, str(_input(spec, tmp_path))]) == 0
    first = capsys.readouterr().out.splitlines()[0].split("\t")
    assert (first[0], first[1], first[3]) == (case, metric, f"(n={n})")


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_wrong_file_fails_with_file_and_line(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    wrong = DATA / ("flaggems/benchmark_v22_results.json" if fmt in ("simpler-strace", "flaggems-record")
                    else "simpler/bgemm_Case0_single_round_task.log")
    assert main(["--plain", "parse", "--format", fmt, str(wrong)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"zlops: {wrong}:")


def test_every_registered_format_is_documented() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text(encoding="utf-8")
    for name in format_names():
        assert f"| `{name}` |" in docs, name
    assert set(CASES) <= set(format_names())
