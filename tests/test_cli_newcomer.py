"""The CLI as a newcomer meets it (issue 15): a header on `zlops runs`, an unknown suite named as such,
the results formats listed by `zlops parse --help`, and a file of the wrong format refused with a hint."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from zlops.cli.app import build_parser, main
from zlops.formats import detect_formats, format_descriptions, format_names
from zlops.model import RunRecord, RunStatus
from zlops.steps.context import open_store

DATA = Path(__file__).resolve().parent / "data"
FLAGGEMS_LOG = DATA / "flaggems_h200" / "20_abs_r3_A.log"  # 20 FlagGems records, no [STRACE] line


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "zlops.yaml"
    path.write_text(yaml.safe_dump({
        "home": str(tmp_path / "home"),
        "pools": {"cpu-local": {"backend": "cpu", "devices": [0]}},
        "suites": {name: {"repo": str(tmp_path / "up"), "command": ["python", "bench.py", "{results}"],
                          "format": "zlops-json", "pools": ["cpu-local"]} for name in ("demo-ops", "kernels")},
    }))
    return path


def test_runs_prints_a_header_row_above_aligned_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    from zlops.config.settings import load_config

    store = open_store(load_config(config))
    store.upsert_run(RunRecord("demo-night-1", "nightly", "demo-ops", "a" * 40, "main", status=RunStatus.DONE,
                               accepted=True, started_at=datetime(2026, 11, 1, 1, tzinfo=UTC)))
    store.dispose()
    assert main(["--plain", "runs", "--config", str(config)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["started", "status", "accepted", "commit", "run"]
    assert row.split() == ["2026-11-01T01:00:00+00:00", "done", "accepted", "a" * 12, "demo-night-1"]
    assert header.index("run") == row.index("demo-night-1")  # the columns line up under their names


def test_runs_of_a_configured_suite_without_runs_is_empty_not_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--plain", "runs", "--config", str(_config(tmp_path)), "--suite", "kernels"]) == 0
    out, err = capsys.readouterr()
    assert out.split() == ["started", "status", "accepted", "commit", "run"]
    assert "no runs stored of suite kernels yet" in err


def test_runs_of_an_unknown_suite_says_it_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--plain", "runs", "--config", str(_config(tmp_path)), "--suite", "nosuch"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "suite 'nosuch' does not exist" in err and "configured suites: demo-ops, kernels" in err


def test_parse_help_lists_every_format_with_its_description(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["parse", "--help"])
    text = capsys.readouterr().out
    descriptions = format_descriptions()
    assert list(descriptions) == format_names() and len(descriptions) == 8
    for name, description in descriptions.items():
        assert f"  {name}" in text and description in text, name


def test_parse_refuses_an_unknown_format_listing_the_known(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main(["parse", "--format", "nope", str(FLAGGEMS_LOG)])
    assert ei.value.code == 2 and "flaggems-record" in capsys.readouterr().err


def test_a_file_of_another_format_that_parses_to_nothing_is_refused_with_the_format_that_fits(
        capsys: pytest.CaptureFixture[str]) -> None:
    # simpler-strace reads any text and finds no [STRACE] marker in a FlagGems log: it was a silent exit 0
    assert main(["--plain", "parse", "--format", "simpler-strace", str(FLAGGEMS_LOG)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{FLAGGEMS_LOG}: no results found in the simpler-strace format" in err
    assert format_descriptions()["simpler-strace"] in err  # what was expected
    assert "it reads as flaggems-record (20 rows): try --format flaggems-record" in err


def test_a_file_no_format_reads_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("nothing measured here\n")
    assert main(["--plain", "parse", "--format", "simpler-strace", str(path)]) == 1
    assert "no other format reads it either" in capsys.readouterr().err


def test_a_malformed_file_gets_the_hint_after_the_parser_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--plain", "parse", "--format", "google-benchmark", str(FLAGGEMS_LOG)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"zlops: {FLAGGEMS_LOG}:1: ") and "try --format flaggems-record" in err


def test_detect_formats_names_only_the_formats_that_read_rows() -> None:
    text = FLAGGEMS_LOG.read_text(encoding="utf-8")
    assert detect_formats(text) == {"flaggems-record": 20}
    assert detect_formats(text, exclude="flaggems-record") == {}
