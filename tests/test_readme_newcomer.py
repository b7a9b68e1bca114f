"""What the README tells a newcomer (issue 15) stays true: how to get `zlops` on PATH, the tests'
services and durations, the demo's figures as a measured range with one labelled run, how to stop
`airflow standalone`, paused DAGs, and the demo's PR branch."""

from __future__ import annotations

import re
from pathlib import Path

from zlops.demo import PR_BRANCH

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _section(start: str, end: str) -> str:
    return README[README.index(start):README.index(end, README.index(start))]


def test_the_two_commands_say_how_to_reach_zlops_and_what_the_tests_need() -> None:
    text = _section("## The two commands", "### What the demo shows")
    assert ". .venv/bin/activate" in text
    assert "PostgreSQL on 127.0.0.1:5432" in text and "Redis on 127.0.0.1:6379" in text
    assert "ZLOPS_SKIP_POSTGRES=1" in text
    assert re.search(r"`bash scripts/test.sh`.*\| PostgreSQL, Redis \| ~\d+ min", text)
    assert re.search(r'`bash scripts/test.sh -m "not slow"`.*\| [\d.]+-[\d.]+ min', text)


def test_the_demo_figures_are_a_range_and_the_table_one_labelled_run() -> None:
    text = _section("### What the demo shows", "## Using it on a real upstream")
    assert "about 25 s" not in README and "+34.49%" not in README  # the figures issue 15 could not reproduce
    assert "**one\nrun**" in text or "**one run**" in text
    assert re.search(r"took [\d.]+, [\d.]+, [\d.]+ and [\d.]+ s", text)  # the measured durations
    demo_doc = (REPO / "docs" / "demo.md").read_text(encoding="utf-8")
    assert "How long it takes, and how much its figures move" in demo_doc


def test_the_airflow_quick_start_says_how_to_stop_it_and_that_dags_start_paused() -> None:
    text = _section("## Airflow quick start", "PR branches:")
    assert "Ctrl-C" in text and "bash scripts/airflow-stop.sh" in text and "scripts/airflow-standalone.sh" in text
    assert (REPO / "scripts" / "airflow-stop.sh").exists() and (REPO / "scripts" / "airflow-standalone.sh").exists()
    assert "DAGs start paused" in text and "airflow dags unpause" in text
    assert "Unpausing a nightly fires a run" in text


def test_the_pr_compare_on_the_demo_branch_is_documented() -> None:
    text = _section("### What the demo shows", "## Using it on a real upstream")
    assert f"--ref {PR_BRANCH[0]}" in text
    assert f'"ref": "{PR_BRANCH[0]}"' in text and "airflow dags trigger zlops_pr_compare" in text
