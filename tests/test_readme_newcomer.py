"""The README is a newcomer's front door (issues 15 and "a front door a newcomer can live with"): its first
screen says what zlops is and the two commands, with no dated measurement; every relative link resolves (a
``#anchor`` names a heading of the page it points to); every command it names exists and parses (``bash``
scripts, ``zlops`` and ``airflow`` command lines, the repository paths in backticks, the config). Its figures
are not checked here: they live in docs/ (benchmarks.md, demo.md, statistics.md, the evidence pages)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from zlops.demo import PR_BRANCH

REPO = Path(__file__).resolve().parents[1]
README_PATH = REPO / "README.md"
README = README_PATH.read_text(encoding="utf-8")
# the pages the README's text moved to (2026-12-06): their links are checked the same way
MOVED = [REPO / "docs" / "usage.md", REPO / "docs" / "airflow.md", REPO / "docs" / "status.md"]

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
# inline spans that quote what a command prints, not a command line
OUTPUT = {"zlops is installed in <checkout>/.venv/bin"}


def _section(start: str, end: str) -> str:
    return README[README.index(start):README.index(end, README.index(start))]


def _prose(text: str) -> str:
    """The text outside fenced blocks."""
    return FENCE.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", _prose(text), re.M)}


def _relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(page.read_text(encoding="utf-8")))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("page", [README_PATH, *MOVED], ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves_to_a_file_and_a_heading(page: Path) -> None:
    links = _relative_links(page)
    assert links, page
    broken = []
    for link in links:
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f"{link}: no {path}")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{link}: no heading #{anchor} in {path.relative_to(REPO)}")
    assert not broken, "\n".join(broken)


def _commands() -> list[str]:
    """Every command line the README names: the lines of its ``sh`` blocks (continuations joined) and the inline
    code spans that start with ``bash``, ``zlops`` or ``airflow``."""
    lines: list[str] = []
    for lang, body in FENCE.findall(README):
        if lang != "sh":
            continue
        joined = body.replace("\\\n", " ")
        lines += [ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    lines += [s for s in INLINE.findall(_prose(README)) if re.match(r"(bash|zlops|airflow) ", s) and s not in OUTPUT]
    return lines


def _argv(line: str) -> list[str]:
    """A command line as argv: its comment dropped, ``[optional ...]`` parts left out, ``<placeholder>`` and
    ``$(...)`` filled in."""
    line = re.sub(r"\$\([^)]*\)", "4242", line)
    line = re.sub(r"\[[^\]'\"]*\]", "", line)
    line = re.sub(r"<[^>]+>", "x", line)
    return shlex.split(line, comments=True)


def test_the_readme_names_commands_of_each_kind() -> None:
    heads = {_argv(c)[0] for c in _commands()}
    assert {"bash", "zlops", "airflow", "export", "."} <= heads, heads


def test_every_bash_script_the_readme_names_exists_and_parses() -> None:
    scripts = {_argv(c)[1] for c in _commands() if _argv(c)[0] == "bash"}
    assert {"scripts/demo.sh", "scripts/test.sh", "scripts/bootstrap.sh", "scripts/airflow-stop.sh",
            "scripts/airflow-standalone.sh"} <= scripts
    for script in sorted(scripts):
        assert (REPO / script).is_file(), script
        done = subprocess.run(["bash", "-n", str(REPO / script)], capture_output=True, text=True)
        assert done.returncode == 0, (script, done.stderr)


def test_every_zlops_command_line_the_readme_names_parses(capsys: pytest.CaptureFixture[str]) -> None:
    from zlops.cli.app import build_parser

    lines = [c for c in _commands() if _argv(c)[0] == "zlops"]
    assert len(lines) >= 8
    for line in lines:
        try:
            build_parser().parse_args(_argv(line)[1:])
        except SystemExit as stop:  # --help exits 0; a usage error exits 2 with argparse's sentence
            assert stop.code == 0, (line, capsys.readouterr().err)


def test_every_airflow_command_line_the_readme_names_parses(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("airflow")
    from airflow.cli.cli_parser import get_parser

    lines = [c for c in _commands() if _argv(c)[0] == "airflow"]
    assert {" ".join(_argv(c)[:3]) for c in lines} >= {"airflow db migrate", "airflow dags trigger",
                                                       "airflow dags unpause"}
    for line in lines:
        try:
            get_parser().parse_args(_argv(line)[1:])
        except SystemExit as stop:
            assert stop.code == 0, (line, capsys.readouterr().err)


def test_every_repository_path_the_readme_names_exists() -> None:
    tops = {p.name for p in REPO.iterdir()}
    paths = {s for s in INLINE.findall(_prose(README))
             if re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", s) and "/" in s and s.split("/")[0] in tops}
    assert "tests/timing.py" in paths and "tests/db_templates.py" in paths
    missing = [p for p in sorted(paths) if not (REPO / p).exists()]
    assert not missing, missing


def test_the_readme_config_is_a_valid_config() -> None:
    from zlops.config.settings import parse_config

    blocks = [body for lang, body in FENCE.findall(README) if lang == "yaml"]
    assert blocks
    for body in blocks:
        config = parse_config(yaml.safe_load(body), source="README.md")
        assert config.suites


def test_the_first_screen_says_what_zlops_is_and_the_two_commands_with_no_measurement() -> None:
    first = "\n".join(README.splitlines()[:40])
    assert "Nightly performance regressions" in first
    assert "bash scripts/demo.sh" in first and "bash scripts/test.sh" in first
    # no run log anywhere in the README: no dates, no commit hashes, no loads, no measured percentages
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", README)
    assert not re.search(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", README)
    assert not re.search(r"load average \d|\bload \d", README)
    assert not re.search(r"[+-]\d+(\.\d+)?%|\d+\.\d+%", README)  # a measured change; thresholds (5%) are settings


def test_the_two_commands_say_how_to_reach_zlops_and_what_the_tests_need() -> None:
    text = _section("## The two commands", "### What the demo shows")
    assert ". .venv/bin/activate" in text
    assert "PostgreSQL on 127.0.0.1:5432" in text and "Redis on 127.0.0.1:6379" in text
    assert "ZLOPS_SKIP_POSTGRES=1" in text
    assert 'scripts/test.sh -m "not slow"' in text
    assert "docs/benchmarks.md" in text  # how long they take lives there, measured
    assert "How long it takes, and how much its figures move" in (REPO / "docs" / "demo.md").read_text("utf-8")


def test_the_airflow_quick_start_says_how_to_stop_it_and_that_dags_start_paused() -> None:
    text = _section("## The Airflow deployment", "## Where each topic is documented")
    assert "Ctrl-C" in text and "bash scripts/airflow-stop.sh" in text and "scripts/airflow-standalone.sh" in text
    assert "DAGs start paused" in text and "airflow dags unpause" in text
    assert "Unpausing a nightly fires a run" in text


def test_the_pr_compare_on_the_demo_branch_is_documented() -> None:
    text = _section("### What the demo shows", "## Using it on a real upstream")
    assert f"--ref {PR_BRANCH[0]}" in text
    assert f'"ref": "{PR_BRANCH[0]}"' in text and "airflow dags trigger zlops_pr_compare" in text
