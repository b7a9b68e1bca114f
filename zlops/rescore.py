"""``zlops rescore RUN``: re-judge a stored run from its artifacts, without re-running anything.

Parsers and judging criteria change (the seed's IR-fingerprint criterion changed twice and moved 24
operators between verdicts); re-running a screen costs hours, re-reading the artifacts seconds.
Rescoring re-parses every shard's results file with today's adapter, replaces the run's result rows,
judges again with today's judge and thresholds, and keeps the compare table it replaces in the
store's archive, so the original verdicts stay beside the new ones.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from zlops import __version__, pipeline
from zlops.config import Config
from zlops.errors import ParseError, ZlopsError
from zlops.formats import parse_results
from zlops.model import CaseResult, CompareSummary, Comparison, ShardStatus
from zlops.runner import read_manifest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RescoreChange:
    pool: str
    case: str
    metric: str
    before: Comparison | None
    after: Comparison | None

    @property
    def changed(self) -> bool:
        b, a = self.before, self.after
        if b is None or a is None:
            return True
        return b.verdict != a.verdict or b.judgement.change_pct != a.judgement.change_pct


@dataclass(frozen=True)
class RescoreResult:
    run_key: str
    revision: int                       # archive revision that holds the previous table
    summary: CompareSummary
    changes: tuple[RescoreChange, ...]
    reparsed: int
    failed: tuple[str, ...]

    def lines(self) -> list[str]:
        out = [(f"rescored {self.run_key}: {self.reparsed} shard(s) re-parsed; previous verdicts kept as "
                f"archive revision {self.revision}")]
        out += [f"  shard {f}" for f in self.failed]
        moved = [c for c in self.changes if c.changed]
        out.append(f"{len(moved)} of {len(self.changes)} series changed:")
        for c in moved:
            before = "-" if c.before is None else f"{c.before.verdict.value} {_pct(c.before)}"
            after = "-" if c.after is None else f"{c.after.verdict.value} {_pct(c.after)}"
            out.append(f"  {c.pool} / {c.case} ({c.metric}): {before} -> {after}")
        out.append(self.summary.overall_line())
        return out


def _pct(c: Comparison) -> str:
    return "" if c.judgement.change_pct is None else f"({c.judgement.change_pct:+.2f}%)"


def rescore(config: Config, run_key: str) -> RescoreResult:
    """Re-parse and re-judge ``run_key`` (see the module docstring)."""
    store = pipeline.open_store(config)
    run = store.get_run(run_key)
    if run is None:
        raise ZlopsError(f"unknown run {run_key!r}; list runs with `zlops runs`")
    ctx = pipeline.context_for(config, run.suite, run_key)
    before = {(c.pool, c.case, c.metric): c for c in store.comparisons(run_key)}
    extras = store.shard_extras(run_key)
    reparsed, failed = 0, []
    for outcome in store.shards(run_key):
        manifest = read_manifest(outcome.artifact_dir) or {}
        path = Path(manifest["results_file"]) if manifest.get("results_file") else outcome.results_file
        if path is None or not path.exists():
            continue  # nothing was written: the shard's status stands
        results: list[CaseResult] = []
        try:
            results = parse_results(ctx.suite.format, path)
        except ParseError as exc:
            status, error = ShardStatus.FAILED, f"malformed results: {exc}"
        else:
            status, error = (ShardStatus.OK, None) if results else (ShardStatus.FAILED, f"{path} holds no cases")
        if outcome.status is ShardStatus.TIMEOUT or (outcome.exit_code not in (None, 0)):
            status, error = outcome.status, outcome.error  # a crash stays a crash, whatever the file says
            results = []
        if status is not ShardStatus.OK:
            failed.append(f"{outcome.pool}/{outcome.device}: {error}")
        extra = extras.get((outcome.pool, outcome.device), {})
        store.record_shard(run_key, replace(outcome, status=status, error=error, results_file=path),
                           results, telemetry=extra.get("telemetry"), identity=extra.get("identity"))
        reparsed += 1
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    revision = store.archive_comparisons(run_key, reason=f"rescore at {when} by zlops {__version__} "
                                                          f"(judge {config.judge})")
    summary = pipeline.compare(ctx)
    after = {(c.pool, c.case, c.metric): c for c in summary.comparisons}
    changes = tuple(RescoreChange(*key, before.get(key), after.get(key)) for key in sorted(before.keys() | after))
    log.info("rescored %s: %d changed", run_key, sum(c.changed for c in changes))
    return RescoreResult(run_key, revision, summary, changes, reparsed, tuple(failed))
