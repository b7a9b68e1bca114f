"""One way from a finished benchmark process to the values zlops keeps: parse, decide the shard's status.

The nightly's device step, a rescore's re-parse, an A/B run of the confirmation, a PR compare side,
and each gang shard of a campaign lane (and of a campaign A/B) all end with a results file in a
shard's artifacts. :func:`read_shard` turns it into what every one of them needs, with the same rules
everywhere:

- the suite's format parses it, under the config's size and time limits for results files (a
  campaign gang shard's own file is in the suite's ``format``; the lane it feeds, in zlops-json, the
  suite's ``stored_format``);
- a file that does not parse (or is refused by those limits) makes the shard FAILED with the file,
  line and problem in its error; a file that holds no case makes it FAILED too; so does a caller's
  ``adapt`` step (a campaign shard renames its results to its series) that refuses what was parsed;
  nothing half-parsed is ever returned;
- with the shard's telemetry summary, a shard measured beside a busy host or a foreign device
  process is INVALID with the figure behind it (:func:`zlops.host.contention.shard_invalid_reason`); its
  results are kept as evidence and never judged.

What a caller does next differs (the nightly and a rescore store the shard; an A/B takes medians; a
PR compare collects its side), the reading does not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from zlops.config.settings import Config
from zlops.errors import ParseError
from zlops.formats import ResultsRefused, parse_results
from zlops.model import CaseResult, ShardOutcome, ShardStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShardRead:
    """A shard after its results file was read: its outcome (status possibly turned FAILED or INVALID)
    and the results to keep (none for a FAILED shard)."""

    outcome: ShardOutcome
    results: tuple[CaseResult, ...] = ()

    @property
    def usable(self) -> bool:
        """OK with results: what a judge may use."""
        return self.outcome.status is ShardStatus.OK and bool(self.results)


#: A caller's last step on the parsed results (e.g. renaming to a campaign shard's series); a
#: :class:`ParseError` it raises fails the shard exactly as a malformed file does.
Adapt = Callable[[Sequence[CaseResult]], Sequence[CaseResult]]


def read_shard(config: Config, suite_name: str, outcome: ShardOutcome, *, results_file: Path | None = None,
               telemetry: Mapping[str, Any] | None = None, fmt: str | None = None,
               adapt: Adapt | None = None) -> ShardRead:
    """Parse ``outcome``'s results file (``results_file`` when given) and settle the shard's status.

    Only an OK shard is read; any other status is returned as it is, with no results. ``telemetry``
    (the shard's summary, :func:`zlops.host.telemetry.summarize_dir`) turns a contended OK shard INVALID
    (its results kept as evidence). ``fmt``: the file's format when it is not the suite's stored
    format (a campaign gang shard's own file, in the harness' ``format``). ``adapt``: applied to a
    non-empty parse; a :class:`ParseError` from it is a malformed file.
    """
    path = results_file if results_file is not None else outcome.results_file
    results: tuple[CaseResult, ...] = ()
    if outcome.status is ShardStatus.OK and path is not None:
        suite = config.suite(suite_name)
        try:
            results = tuple(parse_results(fmt or suite.stored_format, path, root=outcome.artifact_dir,
                                          max_bytes=config.results_max_bytes(suite_name),
                                          timeout_s=config.results_parse_timeout_s))
            if results and adapt is not None:
                results = tuple(adapt(results))
        except ParseError as exc:
            what = "results refused" if isinstance(exc, ResultsRefused) else "malformed results"
            log.warning("shard %s/%s: %s", outcome.pool, outcome.device, exc)
            return ShardRead(replace(outcome, status=ShardStatus.FAILED, error=f"{what}: {exc}"))
        if not results:
            return ShardRead(replace(outcome, status=ShardStatus.FAILED, error=f"results file {path} holds no cases"))
    return apply_contention(config, outcome, results, telemetry)


def apply_contention(config: Config, outcome: ShardOutcome, results: Sequence[CaseResult],
                     telemetry: Mapping[str, Any] | None) -> ShardRead:
    """The contention rule on a read shard: with ``telemetry``, an OK shard measured beside a busy host
    or a foreign device process is INVALID with the figure behind it, its results kept as evidence.
    :func:`read_shard` ends with it; a rescore of a campaign lane (read from its gang shards' own
    files, :func:`zlops.campaign.run.reread_lane`) applies it to the lane as ingest does."""
    kept = tuple(results) if outcome.status is ShardStatus.OK else ()
    if outcome.status is ShardStatus.OK and telemetry is not None:  # beside a busy host or a foreign process?
        from zlops.host.contention import shard_invalid_reason

        reason = shard_invalid_reason(telemetry, config.host_limits(outcome.pool))
        if reason:
            log.warning("shard %s/%s invalid: %s", outcome.pool, outcome.device, reason)
            return ShardRead(replace(outcome, status=ShardStatus.INVALID, error=reason), kept)
    return ShardRead(outcome, kept)
