"""Issue 12's Done-when list, checked mechanically on the demo, with and without a CPU hog.

For each scenario the script builds the demo upstream (zlops.demo: numpy operators, six scripted
commits, one +35% regression and one -33% improvement), runs the real nightly once per commit on
a CPU pool with SQLite, then a manual run of an older commit, then ``zlops report`` of every run,
and counts:

- ``disagree``: rows whose figures differ between the verdict's Figures and any rendering
  (report.txt, report.md, report.html, the Slack payload), or whose change is not
  (value - reference) / reference of the two numbers shown;
- ``unconfirmed_improved``: rows announced ``improved`` without a confirmation (an A/B, or two
  consecutive nights) in their judgement;
- ``busy_verdicts``: rows with a verdict measured on a shard whose own figures are beyond the
  contention gate's limits (recomputed here from the shard's telemetry files), and shards the gate
  marked invalid whose reason does not name the figure;
- ``blank``: rows with a change beyond the regression line and no verdict;
- ``manual_promoted``: the manual older-commit run accepted as a baseline;
- ``rerender_changed``: original artifact files whose hash changed after ``zlops report``.

Scenarios: ``quiet`` (nothing started beside the benchmark; whatever else the host runs still
counts), ``hog`` (a busy loop pinned to the benchmark's CPU for every night) and ``ungated`` (no
hog, the gate turned off: on a host other jobs keep busy, the only way to get verdicts whose
renderings, confirmations and promotion the other counts can check; its ``busy_verdicts`` is 0 by
construction). The benchmark is
pinned with ``taskset -c <cpu>`` so contention is measured on its own CPU. The contention gate runs
at its defaults (25% of one CPU, steal 10%), except the wait for a quiet host, shortened from 60 s
to ``--wait-s`` so a hog night does not take a minute more.

    .venv/bin/python benchmarks/issue12_acceptance.py --work /tmp/issue12 [--judge noise|simple]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zlops.config.settings import Config, parse_config
from zlops.demo import SUITE, create_upstream, demo_config_data
from zlops.host.contention import shard_invalid_reason
from zlops.host.telemetry import summarize_dir
from zlops.model import Comparison, ShardStatus, Verdict
from zlops.report import cells

JUDGED = {Verdict.IMPROVED, Verdict.UNCHANGED, Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE,
          Verdict.SUSPECT, Verdict.SUSPECT_IMPROVED}


@dataclass
class Tally:
    scenario: str
    nights: int = 0
    rows: int = 0
    invalid_shards: int = 0
    judged_rows: int = 0
    disagree: int = 0
    unconfirmed_improved: int = 0
    busy_verdicts: int = 0
    blank: int = 0
    manual_promoted: int = 0
    rerender_changed: int = 0
    figures: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@contextlib.contextmanager
def hog_on(cpu: int) -> Iterator[int]:
    """A busy loop pinned to ``cpu``, outside this process' tree (as a stranger's job would be):
    a double fork, so its parent is not this process."""
    owner = os.getpid()
    read_fd, write_fd = os.pipe()
    first = os.fork()
    if first == 0:  # the intermediate child: start the hog, report its pid, exit
        os.close(read_fd)
        os.setsid()
        hog = os.fork()
        if hog == 0:
            os.sched_setaffinity(0, {cpu})
            while True:  # busy, until this script ends (however it ends)
                for _ in range(200_000):
                    pass
                try:
                    os.kill(owner, 0)
                except ProcessLookupError:
                    os._exit(0)
        os.write(write_fd, str(hog).encode())
        os._exit(0)
    os.close(write_fd)
    os.waitpid(first, 0)
    pid = int(os.read(read_fd, 32).decode())
    os.close(read_fd)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)


def file_hashes(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _row_agrees(c: Comparison, run_dir: Path, slack: str, tally: Tally) -> None:
    f = c.figures
    if f is None:
        return
    b, h, change = cells.fmt_value(f.reference, c.unit), cells.fmt_value(f.value, c.unit), cells.fmt_change(f.change_pct)
    if abs(f.change_pct - (f.value - f.reference) / abs(f.reference) * 100) > 1e-9 * max(1.0, abs(f.change_pct)):
        tally.disagree += 1
        tally.problems.append(f"{run_dir.name} {c.case}: change {f.change_pct} is not derived from its figures")
    if c.judgement.change_pct != f.change_pct:
        tally.disagree += 1
        tally.problems.append(f"{run_dir.name} {c.case}: judgement change {c.judgement.change_pct} != figures'")
    text_rows = [ln for ln in (run_dir / "report.txt").read_text().splitlines() if ln.startswith(c.case + " ")
                 or ln.startswith(c.case + "  ")]
    md_rows = [ln for ln in (run_dir / "report.md").read_text().splitlines()
               if ln.startswith(f"| {c.case} |") or ln.startswith(f"| **{c.case}** |")]
    html = (run_dir / "report.html").read_text()
    for where, rows in (("report.txt", text_rows), ("report.md", md_rows)):
        if not rows or not any(b in r and h in r and change in r for r in rows):
            tally.disagree += 1
            tally.problems.append(f"{run_dir.name} {c.case}: {where} does not show {b} {h} {change}: {rows[:1]}")
    if f"<td class=num>{b}</td><td class=num>{h}</td>" not in html or f"<td class=num>{change}</td>" not in html:
        tally.disagree += 1
        tally.problems.append(f"{run_dir.name} {c.case}: report.html does not show {b} {h} {change}")
    if c.verdict.flagged and f"*{c.case}*" in slack and change not in slack:
        tally.disagree += 1
        tally.problems.append(f"{run_dir.name} {c.case}: the Slack summary names it without {change}")


def check_night(config: Config, result: Any, tally: Tally) -> None:
    run_dir = result.report.markdown.parent
    payload = run_dir / "slack_payload.json"
    slack = json.dumps(json.loads(payload.read_text()), ensure_ascii=False) if payload.exists() else ""
    limits = {s.pool: config.host_limits(s.pool) for s in result.shards}
    busy_shards: dict[tuple[str, int], str] = {}
    for s in result.shards:
        summary = summarize_dir(s.artifact_dir)
        reason = shard_invalid_reason(summary, limits[s.pool])
        pinned = summary.get("foreign_cpu_pinned")
        tally.figures.append(f"{run_dir.name}: foreign CPU {summary.get('foreign_cpu_mean_pct')}%"
                             f"{' of CPU ' + ','.join(map(str, pinned)) if pinned else ' (host)'}, "
                             f"steal max {summary.get('steal_max_pct')}% -> {s.status.value}")
        if reason is not None:
            busy_shards[(s.pool, s.device)] = reason
            if s.status is not ShardStatus.INVALID:
                tally.busy_verdicts += 1
                tally.problems.append(f"{run_dir.name}: shard {s.pool}/{s.device} over the limits but {s.status.value}")
            elif s.error != reason:
                tally.problems.append(f"{run_dir.name}: shard error {s.error!r} is not the gate's reason {reason!r}")
        if s.status is ShardStatus.INVALID:
            tally.invalid_shards += 1
            said = (s.error or "").split(" (busiest")[0]
            for name in ("report.txt", "report.md", "report.html"):
                if said and said not in (run_dir / name).read_text():
                    tally.busy_verdicts += 1
                    tally.problems.append(f"{run_dir.name}: {name} does not name the reason {said!r}")
    for c in result.summary.comparisons:
        tally.rows += 1
        if c.verdict in JUDGED:
            tally.judged_rows += 1
            if any(pool == c.pool for pool, _ in busy_shards):
                tally.busy_verdicts += 1
                tally.problems.append(f"{run_dir.name} {c.case}: {c.verdict.value} on a busy host")
        if c.verdict is Verdict.IMPROVED and not any(k in c.judgement.note for k in
                                                     ("confirmed by A/B", "two consecutive nights")) \
                and config.judge == "noise":
            tally.unconfirmed_improved += 1
            tally.problems.append(f"{run_dir.name} {c.case}: improved without confirmation: {c.judgement.note}")
        pct = c.judgement.worse_pct
        if pct is not None and abs(pct) > config.thresholds.regression_pct and not c.verdict.value:
            tally.blank += 1
        _row_agrees(c, run_dir, slack, tally)


def run_scenario(work: Path, scenario: str, *, judge: str, wait_s: float, rounds: int, workers: int) -> Tally:
    from zlops.cli import main as zlops_main
    from zlops.steps.context import open_store
    from zlops.steps.nightly import run_nightly

    tally = Tally(scenario)
    home = work / scenario
    if home.exists():
        shutil.rmtree(home)
    shas = create_upstream(home / "upstream")
    cpu = min(os.sched_getaffinity(0))
    gate: dict[str, object] = {"gate": False} if scenario == "ungated" else {"contention_wait_s": wait_s}
    data = demo_config_data(home, rounds=rounds, workers=workers, judge=judge, contention=gate)
    suite = data["suites"][SUITE]  # type: ignore[index]
    suite["command"] = ["taskset", "-c", str(cpu), *suite["command"]]
    config_path = home / "zlops.yaml"
    config_path.write_text(json.dumps(data), encoding="utf-8")
    config = parse_config(data, source=str(config_path))
    results = []

    def night(sha: str, label: str) -> Any:
        if scenario == "hog":
            with hog_on(cpu):
                time.sleep(1.0)
                return run_nightly(config, SUITE, sha=sha, run_label=label)
        return run_nightly(config, SUITE, sha=sha, run_label=label)

    for i, sha in enumerate(shas, start=1):
        r = night(sha, f"night-{i}")
        results.append(r)
        check_night(config, r, tally)
        tally.nights += 1
    # a manual run of an older commit (the DAG's sha param): measured and reported, never a baseline
    before = [r.run_key for r in open_store(config).accepted_runs(SUITE)]
    manual = night(shas[1], "manual-older")
    check_night(config, manual, tally)
    after = [r.run_key for r in open_store(config).accepted_runs(SUITE)]
    if manual.accepted or manual.run_key in after:
        tally.manual_promoted += 1
        tally.problems.append(f"manual run of {shas[1][:10]} promoted ({before} -> {after})")
    # re-rendering every run leaves its original artifacts as they were
    for r in [*results, manual]:
        run_dir = r.report.markdown.parent
        hashes = file_hashes(run_dir)
        with contextlib.redirect_stdout(io.StringIO()):
            code = zlops_main(["--plain", "report", r.run_key, "--config", str(config_path)])
        now = file_hashes(run_dir)
        changed = [p for p, h in hashes.items() if now.get(p) != h]
        tally.rerender_changed += len(changed)
        if code != 0 or changed:
            tally.problems.append(f"zlops report {r.run_key}: exit {code}, changed {changed[:5]}")
    return tally


def render(tallies: list[Tally]) -> str:
    cols = ("nights", "rows", "judged_rows", "invalid_shards", "disagree", "unconfirmed_improved", "busy_verdicts",
            "blank", "manual_promoted", "rerender_changed")
    lines = [f"{'scenario':<10}" + "".join(f"{c:>21}" for c in cols)]
    for t in tallies:
        lines.append(f"{t.scenario:<10}" + "".join(f"{getattr(t, c):>21}" for c in cols))
    for t in tallies:
        lines.append("")
        lines.append(f"[{t.scenario}] contention per night:")
        lines += [f"  {f}" for f in t.figures]
        if t.problems:
            lines.append(f"[{t.scenario}] problems:")
            lines += [f"  - {p}" for p in t.problems]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="scratch folder (replaced per scenario)")
    ap.add_argument("--judge", choices=("noise", "simple"), default="noise")
    ap.add_argument("--scenarios", default="quiet,hog,ungated")
    ap.add_argument("--wait-s", type=float, default=5.0, help="contention_wait_s (default config: 60)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=3)
    args = ap.parse_args(argv)
    if shutil.which("taskset") is None:
        print("needs taskset (util-linux) to pin the benchmark", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    tallies = [run_scenario(args.work, s, judge=args.judge, wait_s=args.wait_s, rounds=args.rounds,
                            workers=args.workers) for s in args.scenarios.split(",")]
    print(render(tallies))
    bad = sum(t.disagree + t.unconfirmed_improved + t.busy_verdicts + t.blank + t.manual_promoted
              + t.rerender_changed for t in tallies)
    print(f"\n{'PASS' if bad == 0 else 'FAIL'}: {bad} violation(s) of the Done-when list "
          f"({time.monotonic() - t0:.0f} s, judge {args.judge}, load {os.getloadavg()[0]:.2f})")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
