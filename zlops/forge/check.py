"""What the check on a pull request says: its conclusion, title and summary, from a PR compare's outcome.

Pure functions over the compare's rows. The summary's table is :func:`zlops.forge.prcompare.render` with
only the changed cases kept (``zlops.report.prtable.compare_report(shown=...)``): the same cells,
the same figures and the same Overall line as the report and ``zlops compare`` print; nothing is
recomputed here. The per-series lines quote the same cells (:mod:`zlops.report.cells`).

Conclusion (:func:`conclude`):

- ``failure``: a row whose verdict is in the suite's failure class (``forge.fail_on``: ``potential``
  = any flagged change, ``regression`` = REGRESSION or SEVERE, ``severe`` = SEVERE only);
- ``neutral``: no such row, but series the compare could not decide, each listed: suspects (a change
  the A/B neither confirmed nor cleared: inconclusive), unmeasurable, invalid, failed, missing,
  incomparable (caliber), or flagged below the failure class; or run errors; or nothing to compare
  (the branch has no commits beyond main);
- ``success``: every series judged and none worse. A suspect improvement (better, not confirmed) is listed
  apart and never makes a check neutral.

Every listed change is worded in its direction (:func:`zlops.model.change_text` over the row's figures:
``+100.00% worse``, ``-18.74% (better)``), and the A/B's figures name the runs it had.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from zlops.model import Comparison, Verdict, change_text
from zlops.report import cells

SUCCESS, NEUTRAL, FAILURE = "success", "neutral", "failure"
CONCLUSIONS = (SUCCESS, NEUTRAL, FAILURE)

#: ``forge.fail_on`` -> the verdicts that fail the check
FAIL_CLASSES: dict[str, frozenset[Verdict]] = {
    "potential": frozenset({Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE}),
    "regression": frozenset({Verdict.REGRESSION, Verdict.SEVERE}),
    "severe": frozenset({Verdict.SEVERE}),
}
#: verdicts that leave a series undecided (neutral): listed by name in the check
UNDECIDED = frozenset({Verdict.SUSPECT, Verdict.UNMEASURABLE, Verdict.INVALID, Verdict.FAILED, Verdict.MISSING,
                       Verdict.INCOMPARABLE})
#: listed apart, never a reason to hold a PR: a move in the better direction the compare did not confirm
UNCONFIRMED_BETTER = frozenset({Verdict.SUSPECT_IMPROVED})
#: the payload's version (it waits in the outbox; a later zlops must read it)
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Listed:
    """One series the check names: why, with the report's own cells."""

    case: str
    metric: str
    pool: str
    verdict: str
    change: str
    note: str
    url: str | None = None

    def line(self) -> str:
        name = f"`{self.case}` ({self.metric})"
        link = f" [series]({self.url})" if self.url else ""
        note = f": {self.note}" if self.note else ""
        return f"- {name} **{self.verdict}** {self.change}{note}{link}".replace("  ", " ")


@dataclass(frozen=True)
class CheckReport:
    """A check as the forge clients post it (JSON-able through :meth:`to_payload`)."""

    suite: str
    name: str
    head_sha: str
    status: str                      # "completed" | "in_progress"
    conclusion: str | None           # success | neutral | failure (None while in progress)
    title: str
    summary: str                     # markdown
    external_id: str
    details_url: str | None = None
    pr: int | None = None
    listed: tuple[Listed, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.status not in ("completed", "in_progress"):
            raise ValueError(f"CheckReport.status: expected completed or in_progress, got {self.status!r}")
        if (self.status == "completed") != (self.conclusion in CONCLUSIONS):
            raise ValueError(f"CheckReport.conclusion: expected one of {CONCLUSIONS} when completed, "
                             f"None in progress, got {self.conclusion!r}")
        if not self.head_sha:
            raise ValueError("CheckReport.head_sha: expected a commit SHA, got an empty value")

    @property
    def description(self) -> str:
        """One line (a commit status's description: 140 characters at most)."""
        state = self.conclusion or "running"
        text = f"{state}: {self.title}" if not self.title.startswith(state) else self.title
        return text if len(text) <= 140 else text[:137] + "..."

    def to_payload(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "suite": self.suite, "name": self.name,
                "head_sha": self.head_sha, "status": self.status, "conclusion": self.conclusion,
                "title": self.title, "summary": self.summary, "external_id": self.external_id,
                "details_url": self.details_url, "pr": self.pr,
                "listed": [vars(x) for x in self.listed]}

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> CheckReport:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"forge check payload: schema_version {version!r} is not {SCHEMA_VERSION}")
        fields = {k: data[k] for k in ("suite", "name", "head_sha", "status", "conclusion", "title", "summary",
                                       "external_id", "details_url", "pr")}
        return cls(**fields, listed=tuple(Listed(**x) for x in data.get("listed") or ()))


def external_id(suite: str) -> str:
    """The id that finds a suite's check again on a commit (a re-run updates it)."""
    return f"zlops:{suite}"


def changed(c: Comparison) -> bool:
    """A row the check's table shows: anything but unchanged."""
    return c.verdict is not Verdict.UNCHANGED


def conclude(rows: Sequence[Comparison], *, fail_on: str, errors: Sequence[str] = (),
             compared: bool = True) -> tuple[str, list[Comparison], list[Comparison]]:
    """(conclusion, failing rows, undecided rows); see the module docstring."""
    failing_set = FAIL_CLASSES[fail_on]
    failing = [c for c in rows if c.verdict in failing_set and not c.follows]
    failed_ids = {id(c) for c in failing}
    undecided = [c for c in rows if id(c) not in failed_ids and not c.follows
                 and (c.verdict in UNDECIDED or c.verdict.flagged)]
    if failing:
        return FAILURE, failing, undecided
    if undecided or errors or not compared or not rows:
        return NEUTRAL, failing, undecided
    return SUCCESS, failing, undecided


def series_url(links_url: str | None, c: Comparison) -> str | None:
    """The zlops series page of a row (its nightly history), under ``forge.links_url``."""
    if not links_url:
        return None
    pool = c.pool.split(".", 1)[0]
    return f"{links_url.rstrip('/')}/series?" + urlencode({"suite": c.suite, "pool": pool, "case": c.case,
                                                           "metric": c.metric})


def report_url(links_url: str | None, run_key: str) -> str | None:
    """The zlops page of the PR compare's head run."""
    return None if not links_url else f"{links_url.rstrip('/')}/run?key={quote(run_key, safe='')}"


def change_words(c: Comparison) -> str:
    """A row's change in the direction it moved (:func:`zlops.model.change_text` of its figures), else the
    report's cell."""
    figures = c.figures
    if figures is not None and figures.reference > 0 and figures.value > 0:
        return change_text(figures.change_pct, figures.worse_pct)
    return cells.fmt_change(cells.change_pct(c)).strip()


def _listed(c: Comparison, links_url: str | None) -> Listed:
    return Listed(case=c.case, metric=c.metric, pool=c.pool, verdict=c.verdict.label, change=change_words(c),
                  note=(c.judgement.note or "").strip(), url=series_url(links_url, c))


def build_check(*, suite: str, name: str, fail_on: str, head_sha: str, ref: str, rows: Sequence[Comparison],
                table: str, errors: Sequence[str], compared: bool, run_key: str, links_url: str | None,
                report_path: str | None = None, pr: int | None = None) -> CheckReport:
    """The completed check of one PR compare. ``table`` is the report's text with only the changed cases
    (:func:`zlops.forge.prcompare.render` with ``shown=changed``)."""
    conclusion, failing, undecided = conclude(rows, fail_on=fail_on, errors=errors, compared=compared)
    if not compared:
        title = f"nothing to compare: {ref} has no commits beyond the suite's branch"
    elif conclusion == FAILURE:
        title = (f"{len(failing)} regression{'s' if len(failing) != 1 else ''} beyond {fail_on}: "
                 + ", ".join(f"{c.case} {change_words(c)}" for c in failing[:3])
                 + (" ..." if len(failing) > 3 else ""))
    elif conclusion == NEUTRAL and undecided:
        title = (f"{len(undecided)} series not decided: "
                 + ", ".join(f"{c.case} ({c.verdict.label})" for c in undecided[:3])
                 + (" ..." if len(undecided) > 3 else ""))
    elif conclusion == NEUTRAL:
        title = "the compare did not measure every series" if errors else "no series compared"
    else:
        judged = sum(1 for c in rows if not c.verdict.is_gap)
        title = f"no regression in {judged} series"
    report = report_url(links_url, run_key)
    lines = [f"**zlops PR compare**, suite `{suite}`, `{ref}` at `{head_sha[:12]}`: **{conclusion}**", ""]
    if failing:
        lines += [f"Regressions beyond `{fail_on}` (fail the check):", "",
                  *(_listed(c, links_url).line() for c in failing), ""]
    if undecided:
        lines += ["Not decided (neutral: re-run, or read the series' history):", "",
                  *(_listed(c, links_url).line() for c in undecided), ""]
    better = [c for c in rows if c.verdict in UNCONFIRMED_BETTER and not c.follows]
    if better:
        lines += ["Better, not confirmed (no effect on the conclusion):", "",
                  *(_listed(c, links_url).line() for c in better), ""]
    lines += ["```", table.rstrip("\n"), "```", ""]
    if report:
        lines.append(f"Full report: [{run_key}]({report})")
    elif report_path:
        lines.append(f"Full report: `{report_path}`")
    summary = "\n".join(lines).rstrip() + "\n"
    return CheckReport(suite=suite, name=name, head_sha=head_sha, status="completed", conclusion=conclusion,
                       title=title, summary=summary, external_id=external_id(suite), details_url=report, pr=pr,
                       listed=tuple(_listed(c, links_url) for c in [*failing, *undecided]))


def running_check(*, suite: str, name: str, head_sha: str, ref: str, who: str, pr: int | None) -> CheckReport:
    """The check while the compare runs (posted by the receiver when it triggers one)."""
    return CheckReport(suite=suite, name=name, head_sha=head_sha, status="in_progress", conclusion=None,
                       title=f"PR compare of {ref} requested by {who}: running",
                       summary=f"zlops is comparing `{ref}` with its merge-base (suite `{suite}`).\n",
                       external_id=external_id(suite), pr=pr)


def refused_check(*, suite: str, name: str, head_sha: str, sentence: str, pr: int | None) -> CheckReport:
    """A trigger zlops refused (the commenter cannot write to the repository): said in a check of its own
    (``<name> / trigger``), so a refusal never replaces a compare's conclusion."""
    return CheckReport(suite=suite, name=f"{name} / trigger", head_sha=head_sha, status="completed",
                       conclusion=NEUTRAL, title=sentence[:200], summary=sentence + "\n",
                       external_id=external_id(suite) + ":trigger", pr=pr)



def closed_check(*, suite: str, name: str, head_sha: str, ref: str, reason: str, pr: int | None) -> CheckReport:
    """The check zlops closes itself when a compare it opened did not conclude (it raised, timed out, or the
    receiver running it restarted): neutral, with the reason, so no commit shows "running" forever."""
    title = f"the compare did not finish: {reason}"
    summary = (f"**zlops PR compare**, suite `{suite}`, `{ref}` at `{head_sha[:12]}`: **neutral**\n\n"
               f"The compare did not finish, so nothing was judged: {reason}\n\n"
               "Comment `/zlops compare` to run it again.\n")
    return CheckReport(suite=suite, name=name, head_sha=head_sha, status="completed", conclusion=NEUTRAL,
                       title=title if len(title) <= 200 else title[:197] + "...", summary=summary,
                       external_id=external_id(suite), pr=pr)
