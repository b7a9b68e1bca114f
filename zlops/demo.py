"""``zlops demo``: a scripted upstream and a week of nightlies over it, on the embedded default.

The demo upstream is a small numpy operator library (softmax, layernorm, gelu, cumsum, matmul)
with a benchmark script that writes zlops JSON. Its history, one commit per night:

1. the library as first written (layernorm works on tiles of 640 columns, padding the last one);
2. documentation only;
3. softmax is tiled like layernorm: about 30% more work, a REGRESSION;
4. a comment in the benchmark script only;
5. layernorm normalizes the valid columns only: about 30% faster, IMPROVED;
6. a test file only.

Beside main, the branch ``feature/softmax-untiled`` (one commit on night 6) makes softmax work on the
valid columns only, undoing night 3's tiling: about 25% faster, the change a PR compare
(``zlops compare --ref feature/softmax-untiled`` or the ``zlops_pr_compare`` DAG) should find.

The demo runs the real nightly (worktree, uv venv, one benchmark process on the CPU pool, SQLite,
compare, report, plots) once per commit and checks that exactly those two changes were found.
Commit dates and authors are fixed, so the demo's SHAs are the same on every machine.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from zlops.config.settings import Config, parse_config
from zlops.host import gitops, proc
from zlops.model import ShardStatus, Verdict

log = logging.getLogger(__name__)

SUITE = "demo-ops"
#: device seconds a paired demo night may spend (discarded pairs' retries included)
PAIRED_BUDGET_S = 240
POOL = "cpu-local"
MARKER = ".zlops-demo"

#: (commit message, {path in the upstream: template file}, {op: expected verdict at this commit})
HISTORY: tuple[tuple[str, dict[str, str], dict[str, Verdict]], ...] = (
    ("demo_ops: softmax, layernorm, gelu, cumsum and matmul, with bench.py",
     {"pyproject.toml": "pyproject.toml.tmpl", "README.md": "README_v1.md.tmpl", "bench.py": "bench.py.tmpl",
      "demo_ops/__init__.py": "demo_ops_init.py.tmpl", "demo_ops/ops.py": "ops_v1.py.tmpl"}, {}),
    ("docs: describe the operators", {"README.md": "README_v2.md.tmpl"}, {}),
    ("softmax: process rows in tiles of 640 columns, like layernorm", {"demo_ops/ops.py": "ops_v3.py.tmpl"},
     {"softmax": Verdict.REGRESSION}),
    ("bench: explain why a sample is the fastest of its calls", {"bench.py": "bench_v4.py.tmpl"}, {}),
    ("layernorm: normalize the valid columns only, without tile padding", {"demo_ops/ops.py": "ops_v5.py.tmpl"},
     {"layernorm": Verdict.IMPROVED}),
    ("tests: check every operator against a numpy reference", {"tests/test_ops.py": "test_ops.py.tmpl"}, {}),
)
OPS = ("cumsum", "gelu", "layernorm", "matmul", "softmax")
#: a branch off main's last commit to try ``zlops compare`` / ``zlops_pr_compare`` with:
#: (name, commit message, {path: template}, {op: expected verdict against its merge-base})
PR_BRANCH: tuple[str, str, dict[str, str], dict[str, Verdict]] = (
    "feature/softmax-untiled", "softmax: work on the valid columns only, without tile padding",
    {"demo_ops/ops.py": "ops_pr_softmax.py.tmpl"}, {"softmax": Verdict.IMPROVED})


def _template(name: str) -> str:
    return (resources.files("zlops") / "demo_upstream" / name).read_text(encoding="utf-8")


def _commit(path: Path, files: dict[str, str], message: str, day: int) -> str:
    """Write ``files`` (path -> template) into the upstream and commit them with a fixed author and date."""
    for rel, tmpl in files.items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_template(tmpl), encoding="utf-8")
    date = f"2026-11-{day:02d}T01:00:00+00:00"
    env = proc.build_env({"GIT_AUTHOR_NAME": "Demo Dev", "GIT_AUTHOR_EMAIL": "dev@demo-ops.example",
                          "GIT_COMMITTER_NAME": "Demo Dev", "GIT_COMMITTER_EMAIL": "dev@demo-ops.example",
                          "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "LC_ALL": "C"})
    proc.run(["git", "-C", str(path), "add", "--all"], env=env, what="git add")
    proc.run(["git", "-C", str(path), "-c", "commit.gpgsign=false", "commit", "--quiet", "-m", message],
             env=env, what="git commit")
    return gitops.git(["-C", str(path), "rev-parse", "HEAD"]).strip()


def create_upstream(path: Path) -> list[str]:
    """Create the demo upstream repository at ``path`` (replacing one made earlier); returns main's
    SHAs, one per night. The PR branch (:data:`PR_BRANCH`) is made off main's last commit."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    gitops.git(["init", "--quiet", "--initial-branch=main", str(path)], what="git init")
    shas = [_commit(path, files, message, night) for night, (message, files, _) in enumerate(HISTORY, start=1)]
    branch, message, files, _ = PR_BRANCH
    gitops.git(["-C", str(path), "checkout", "--quiet", "-b", branch], what="git checkout -b")
    _commit(path, files, message, len(HISTORY) + 1)
    gitops.git(["-C", str(path), "checkout", "--quiet", "main"], what="git checkout main")
    return shas


def demo_config_data(home: Path, *, rounds: int, workers: int, judge: str = "simple",
                     contention: dict[str, object] | None = None, measure: str = "nightly") -> dict[str, object]:
    """The config the demo runs with (also written to ``<home>/zlops.yaml`` for reuse).

    The demo judges with the seed's plain 2%/5% rule by default, so a week of nights takes under a minute
    on a quiet machine (docs/demo.md has measured durations);
    ``judge="noise"`` shows the production judge, whose same-device A/B confirmations of every
    suspect make it a few minutes on a 2-core machine. ``contention`` is the config's
    ``contention`` section (default: none, so the host contention gate is on with its defaults).
    ``measure="paired"`` (what ``zlops demo`` runs) measures each night's commit and its baseline commit in
    interleaved fresh processes (zlops.judge.paired): on a shared, loaded host the load cancels in each pair;
    ``"nightly"`` (this function's default, for tests of the plain night) measures each commit alone.
    """
    extra: dict[str, object] = {"contention": dict(contention)} if contention is not None else {}
    return {
        "home": str(home),
        "pools": {POOL: {"backend": "cpu", "devices": [0], "measure": measure}},
        "suites": {SUITE: {
            "repo": str(home / "upstream"),
            "branch": "main",
            "install": [["pip", "install", "-e", "."]],
            "command": ["python", "bench.py", "--out", "{results}", "--device", "{device}",
                        "--rounds", "{rounds}", "--workers", str(workers)],
            "format": "zlops-json",
            "pools": [POOL],
            "rounds": rounds,
            "timeout_s": 600,
            "schedule": "0 2 * * *",
        }},
        "thresholds": {"potential_pct": 2, "regression_pct": 5},
        "judge": judge,
        # the demo's CPU suite runs in ~1 s a night, so a share of it buys no A/B: give it seconds
        "noise": {"ab_pairs": 7, "ab_budget_s": 300},
        # a paired night: 5 to 7 pairs of one-process runs (~1-5 s each here; 7 for the rank test to reach
        # noise.alpha 0.002), busy pairs measured again
        # and an untouched operator is cleared when its change's CI lies inside the demo's regression line
        "paired": {"min_pairs": 5, "max_pairs": 7, "budget_s": PAIRED_BUDGET_S, "quiet_wait_s": 20,
                   "equivalence_pct": 5},
        "slack": {"channel": "#perf-nightly"},
        **extra,
    }


@dataclass
class DemoNight:
    night: int
    sha: str
    subject: str
    run_key: str
    verdicts: dict[str, tuple[Verdict, float | None]] = field(default_factory=dict)
    #: the judge's note per op (why a series is invalid or inconclusive)
    notes: dict[str, str] = field(default_factory=dict)
    #: why the night's shard was not judged (the host contention gate's reason), when it was not
    invalid: str | None = None
    report: Path | None = None
    plots: list[Path] = field(default_factory=list)


@dataclass
class DemoResult:
    home: Path
    config_path: Path
    nights: list[DemoNight]
    problems: list[str]
    notes: list[str]
    #: nights or series the host let nobody measure (a saturated host): "could not measure", not a failed check
    unmeasured: list[str] = field(default_factory=list)
    measure: str = "nightly"
    #: the 1-minute load average when the demo started and ended, and its wall time (for the summary)
    load: tuple[float, float] | None = None
    seconds: float | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and not self.unmeasured

    @property
    def could_not_measure(self) -> bool:
        """The check could not be made (the host was too busy), and no measured night contradicts it."""
        return not self.problems and bool(self.unmeasured)


def check(nights: Sequence[DemoNight], *, paired: bool = False) -> tuple[list[str], list[str]]:
    """Compare the verdicts with the scripted history: (problems, noise notes).

    A problem is a scripted change that was not found where it happened, or an untouched operator
    that moved by more than the regression threshold. An untouched operator that crossed only the
    2% line is a noise note: on a shared machine that line sits at the measurement's noise floor,
    which is what the noise-aware judge is for. With ``paired`` nights an untouched operator whose
    pairs were inconclusive (neither confirmed nor cleared: nobody is told) is a note whatever its size.
    """
    problems: list[str] = []
    notes: list[str] = []
    for night, (_, _, expected) in zip(nights, HISTORY[: len(nights)], strict=True):
        if night.invalid is not None:  # could not measure (unmeasured()), not a failed check
            continue
        for op in OPS:
            verdict, change = night.verdicts.get(op, (Verdict.MISSING, None))
            if verdict is Verdict.INVALID:
                continue
            want = expected.get(op, Verdict.NEW if night.night == 1 else Verdict.UNCHANGED)
            if verdict == want or (want is Verdict.REGRESSION and verdict is Verdict.SEVERE):
                continue
            shown = "" if change is None else f" ({change:+.2f}%)"
            line = f"night {night.night} ({night.sha[:10]}): {op} was {verdict.value}{shown}, expected {want.value}"
            noise = (want is Verdict.UNCHANGED and change is not None
                     and verdict in (Verdict.POTENTIAL, Verdict.IMPROVED, Verdict.SUSPECT, Verdict.SUSPECT_IMPROVED)
                     and abs(change) <= 5.0)
            # a paired night's inconclusive series was neither confirmed nor cleared: it is stated with its
            # figures and alerts nobody, so it is no finding (a scripted change left inconclusive is missed)
            inconclusive = paired and want is Verdict.UNCHANGED and verdict.awaiting_confirmation
            if inconclusive:
                line = (f"night {night.night} ({night.sha[:10]}): {op} inconclusive{shown}: the pairs neither "
                        "confirmed nor cleared it")
            (notes if noise or inconclusive else problems).append(line)
    return problems, notes


def unmeasured(nights: Sequence[DemoNight]) -> list[str]:
    """What the host let nobody measure: nights whose shard was invalid (host busy for the whole budget)
    and series judged invalid, each with the reason and its figure."""
    out: list[str] = []
    for night in nights:
        if night.invalid is not None:
            out.append(f"night {night.night} ({night.sha[:10]}): {night.invalid}")
            continue
        for op in OPS:
            verdict, _ = night.verdicts.get(op, (Verdict.MISSING, None))
            if verdict is Verdict.INVALID:
                out.append(f"night {night.night} ({night.sha[:10]}): {op} invalid: {night.notes.get(op, '')}")
    return out


def prepare_home(home: Path) -> None:
    """Start from a clean demo home, keeping the environment cache so reruns are fast."""
    home.mkdir(parents=True, exist_ok=True)
    entries = [p for p in home.iterdir() if p.name not in ("envs", MARKER)]
    if entries and not (home / MARKER).exists():
        raise SystemExit(f"{home} is not empty and was not made by `zlops demo`; pass --home to an empty folder")
    for p in entries:
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
    (home / MARKER).write_text("made by zlops demo; everything here but envs/ is replaced on the next demo\n")


#: (rounds, workers) per measurement mode: a paired night's runs are fresh processes already, so each
#: run is one benchmark process (5 samples); a plain night pools 5 processes of 5 samples
DEMO_SIZES = {"paired": (5, 1), "nightly": (5, 5)}


def run_demo(home: Path, *, rounds: int | None = None, workers: int | None = None, interactive: bool | None = None,
             echo: bool = True, judge: str = "simple", contention: dict[str, object] | None = None,
             measure: str = "paired") -> DemoResult:
    """Build the upstream, run one nightly per commit, and check the verdicts.

    ``measure="paired"`` (default): each night measures its commit and the previous night's in
    interleaved fresh processes (zlops.judge.paired), so load on a shared host cancels in each pair.
    """
    import time

    from zlops.progress import make_progress
    from zlops.steps.nightly import run_nightly

    t0, load0 = time.monotonic(), os.getloadavg()[0]
    home = home.absolute()
    prepare_home(home)
    shas = create_upstream(home / "upstream")
    size = DEMO_SIZES.get(measure, DEMO_SIZES["nightly"])
    data = demo_config_data(home, rounds=rounds or size[0], workers=workers or size[1], judge=judge,
                            contention=contention, measure=measure)
    config_path = home / "zlops.yaml"
    config_path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    config: Config = parse_config(data, source=str(config_path))
    progress = make_progress(interactive)
    nights: list[DemoNight] = []
    try:
        for i, sha in enumerate(shas, start=1):
            result = run_nightly(config, SUITE, sha=sha, run_label=f"demo-night-{i}", progress=progress)
            night = DemoNight(i, sha, HISTORY[i - 1][0], result.run_key, report=result.report.markdown,
                              plots=list(result.report.plots))
            for c in result.summary.comparisons:
                night.verdicts[c.case] = (c.verdict, c.judgement.change_pct)
                night.notes[c.case] = c.judgement.note
            bad = [s for s in result.shards if s.status is ShardStatus.INVALID]
            night.invalid = "; ".join(f"shard {s.pool}/{s.device} invalid: {s.error}" for s in bad) or None
            nights.append(night)
            if echo:
                flagged = [f"{c.case} {c.verdict.value} {c.judgement.change_pct:+.1f}%"
                           for c in result.summary.comparisons
                           if c.judgement.change_pct is not None and c.verdict not in (Verdict.UNCHANGED,)]
                progress.note(f"night {i} {sha[:10]} {HISTORY[i - 1][0]!r}: {result.summary.overall_line()}"
                              + (f"  [{'; '.join(flagged)}]" if flagged else ""))
    finally:
        progress.close()
    problems, notes = check(nights, paired=measure == "paired")
    return DemoResult(home, config_path, nights, problems, notes, unmeasured=unmeasured(nights), measure=measure,
                      load=(load0, os.getloadavg()[0]), seconds=time.monotonic() - t0)


#: ``zlops demo``'s exit status when the host let it measure too little to check anything (documented in
#: README and docs/demo.md; a failed check is 1)
EXIT_NOT_MEASURED = 5


def _cleared_text(result: DemoResult) -> str:
    """``17 untouched case-nights cleared, 6 inconclusive`` of a paired demo."""
    cleared = inconclusive = 0
    for n, (_, _, expected) in zip(result.nights[1:], HISTORY[1:], strict=False):
        for op in OPS:
            verdict, _ = n.verdicts.get(op, (Verdict.MISSING, None))
            if op not in expected and n.invalid is None:
                cleared += verdict is Verdict.UNCHANGED
                inconclusive += verdict.awaiting_confirmation
    return f"{cleared} untouched case-nights cleared, {inconclusive} inconclusive"


def _inconclusive_lines(result: DemoResult) -> list[str]:
    """One line per night: its untouched operators the pairs left inconclusive, with their changes."""
    out = []
    for n, (_, _, expected) in zip(result.nights[1:], HISTORY[1:], strict=False):
        cells = [f"{op} {change:+.2f}%" for op in OPS if op not in expected
                 for verdict, change in [n.verdicts.get(op, (Verdict.MISSING, None))]
                 if verdict.awaiting_confirmation and change is not None]
        if cells:
            out.append(f"  - night {n.night} ({n.sha[:10]}): " + ", ".join(cells))
    return out


def _load_text(result: DemoResult) -> str:
    if result.load is None:
        return ""
    return f" (load average {result.load[0]:.1f} at the start, {result.load[1]:.1f} at the end)"


def untouched_moves(nights: Sequence[DemoNight]) -> list[float]:
    """|change| in % of every operator on every night where the scripted history did not touch it: the
    host's own night-to-night noise as the demo saw it."""
    out: list[float] = []
    for night, (_, _, expected) in zip(nights, HISTORY[: len(nights)], strict=True):
        for op in OPS:
            _, change = night.verdicts.get(op, (Verdict.MISSING, None))
            if night.night > 1 and op not in expected and change is not None:
                out.append(abs(change))
    return out


def render_summary(result: DemoResult) -> str:
    """The demo's final summary: op x night change table, the check, and where the reports are."""
    how = ("one paired night per commit of the demo upstream: each commit and the one before it in interleaved "
           "fresh processes" if result.measure == "paired" else "one nightly per commit of the demo upstream")
    lines = ["", f"zlops demo: {how} (CPU pool, SQLite)", ""]
    header = f"{'night':<6}{'commit':<12}" + "".join(f"{op:>16}" for op in OPS) + "   subject"
    lines += [header, "-" * len(header)]
    marks = {Verdict.REGRESSION: " !!", Verdict.SEVERE: " !!", Verdict.POTENTIAL: " !", Verdict.IMPROVED: " ++",
             Verdict.SUSPECT: " ?", Verdict.SUSPECT_IMPROVED: " ?+"}
    for n in result.nights:
        cells = []
        for op in OPS:
            verdict, change = n.verdicts.get(op, (Verdict.MISSING, None))
            cell = verdict.value if change is None else f"{change:+.2f}%{marks.get(verdict, '')}"
            cells.append(f"{cell:>16}")
        lines.append(f"{n.night:<6}{n.sha[:10]:<12}" + "".join(cells) + f"   {n.subject}")
    suspect = ("? inconclusive (the pairs neither confirm nor clear it; nobody is alerted)"
               if result.measure == "paired" else "? suspect (noise judge: not confirmed)")
    lines += ["", f"!! regression (> +5%)   ! potential regression (> +2%)   ++ improved (< -2%)   {suspect}", ""]
    if result.could_not_measure:
        lines.append(f"could not measure: the host was too busy to measure {len(result.unmeasured)} night(s) or "
                     f"series{_load_text(result)}:")
        lines += [f"  - {u}" for u in result.unmeasured]
        lines.append(f"what to do: other programs kept this host saturated for minutes. Run the demo again when "
                     f"`uptime` shows a load average under about {2 * (os.cpu_count() or 1)}, or give a paired night "
                     "more time (paired.budget_s, paired.quiet_wait_s in the printed zlops.yaml; docs/demo.md). "
                     f"Exit status {EXIT_NOT_MEASURED}: could not measure (a failed check exits 1).")
    elif result.ok and result.measure == "paired":
        lines.append("check: softmax confirmed as a regression at night 3, layernorm as improved at night 5, nothing "
                     f"else found ({_cleared_text(result)}): OK")
    elif result.ok:
        lines.append("check: softmax flagged as a regression at night 3, layernorm improved at night 5, "
                     "no untouched operator moved beyond the regression threshold: OK")
    else:
        lines.append("check FAILED: the verdicts differ from the scripted history:")
        lines += [f"  - {p}" for p in result.problems]
        moved = untouched_moves(result.nights)
        if result.unmeasured:
            lines.append("also not measured (host busy):")
            lines += [f"  - {u}" for u in result.unmeasured]
        if moved and max(moved) > 5.0 and result.measure != "paired":
            lines.append(f"why: operators whose code did not change moved by up to {max(moved):.1f}% between nights "
                         "on this host: its timing noise is beyond what the plain 2%/5% rule can judge. Run again "
                         "when the host is quieter, or run `zlops demo` without --measure nightly (paired nights: each "
                         "commit and its baseline in interleaved processes, so the host's load cancels), or "
                         "`zlops demo --judge noise` (a suspect is confirmed or cleared by a same-device A/B).")
    if result.notes and result.measure == "paired":
        lines.append("inconclusive (the pairs neither confirmed a change nor cleared it within ±5%; this host's "
                     "noise, not code; nobody is alerted):")
        lines += _inconclusive_lines(result)
    elif result.notes:
        lines.append("noise: untouched operators that crossed the 2% line (machine noise, not code):")
        lines += [f"  - {n}" for n in result.notes]
    if result.seconds is not None:
        lines.append(f"took {result.seconds:.0f} s{_load_text(result)}")
    lines += ["", f"config:  {result.config_path}", f"store:   {result.home / 'zlops.db'}"]
    for n in result.nights:
        if n.report is not None:
            lines.append(f"report night {n.night}: {n.report}")
    for n in result.nights:
        for p in n.plots:
            lines.append(f"plot night {n.night}: {p}")
    return "\n".join(lines)
