"""Which run becomes the baseline: only a newer run on the suite's branch line, never a step back.

A nightly measures whatever commit it is given (the branch head, or a ``sha`` a person picked), but
only a run that moves the baseline *forward along the branch* may become it:

- its commit is on the branch's first-parent line (the commits the branch itself moved through;
  a commit of a merged side branch or of a PR is measured and reported, never promoted);
- it is not older than the current baseline: the accepted run whose commit is newest on that line
  (the same commit measured again counts as not older);
- the night is not a caliber break: no series of it was INCOMPARABLE with its baseline, and none was
  judged across a caliber difference by ``--allow-caliber-mismatch``; a new driver or timer must be
  accepted by a person, once, explicitly;
- at least one shard produced valid data (not failed, timed out, skipped or invalid);
- every pool's planned shards ended OK, or at least ``promote_min_ok_share`` of them (default 1.0:
  all). A night whose devices mostly failed (8 of 9) measured a sliver of the suite, on the devices
  that happened to survive; as a baseline it would leave most series judged against an older night
  and the rest against a partial one. Such a night is reported, never promoted, unless the share
  is lowered on purpose (e.g. 0.9 for a large pool where one flaky device must not block a baseline).

``promote`` (``zlops nightly --promote``, the DAG's ``promote`` trigger param), recorded in the run's
meta at fetch, overrides the branch-line and caliber rules for backfills and deliberate caliber
changes; the decision says what it overrode. The decision is taken by :func:`decide`, shown by the
report step (which runs before promotion) and stored in the run's meta (``promotion``) by
:func:`zlops.steps.promote.promote`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zlops.errors import GitError
from zlops.host import gitops
from zlops.model import RunRecord, ShardStatus, Verdict

if TYPE_CHECKING:
    from zlops.steps.context import RunContext

CALIBER_MARK = "!!! [caliber]"


@dataclass(frozen=True)
class PromotionDecision:
    """Whether the run becomes a baseline, and why (a sentence for the report and the run's meta)."""

    accept: bool
    reason: str
    forced: bool = False
    current_baseline: str | None = None    # run key of the baseline this run was measured against

    def to_json(self) -> dict[str, Any]:
        return {"accepted": self.accept, "reason": self.reason, "forced": self.forced,
                "current_baseline": self.current_baseline}

    def line(self) -> str:
        return f"{'promoted to baseline' if self.accept else 'not promoted'}: {self.reason}"


def decide(ctx: RunContext) -> PromotionDecision:
    """The promotion decision for ``ctx``'s run as the store and the mirror say now (see the module)."""
    from zlops.steps.context import open_store

    store = open_store(ctx.config)
    run = store.get_run(ctx.run_key)
    if run is None:
        return PromotionDecision(False, f"unknown run {ctx.run_key}")
    forced = bool(run.meta.get("promote"))
    shards = store.shards(ctx.run_key)
    if not any(o.status is ShardStatus.OK for o in shards):
        states = ", ".join(sorted({f"{o.status.value}" for o in shards})) or "no shard recorded"
        return PromotionDecision(False, f"no shard produced valid data ({states})", forced)
    refusals = [_share_refusal(ctx, shards), _caliber_refusal(store.caliber_comparisons(ctx.run_key, CALIBER_MARK))]
    try:
        line = gitops.first_parent_line(gitops.mirror_of(ctx.suite.repo, ctx.mirror_path), ctx.suite.branch,
                                        max_count=ctx.config.baseline_depth)
    except GitError as exc:
        line = []
        refusals.append(f"the branch line of {ctx.suite.branch} cannot be read ({exc})")
    position = {sha: i for i, sha in enumerate(line)}
    current = current_baseline(store.accepted_runs(ctx.suite_name), position, exclude=ctx.run_key)
    refusals.append(_line_refusal(run, ctx.suite.branch, position, current))
    why = "; ".join(r for r in refusals if r)
    base_key = current.run_key if current else None
    if forced:
        overrode = f" (overriding: {why})" if why else ""
        return PromotionDecision(True, f"promoted by the explicit promote flag{overrode}", True, base_key)
    if why:
        hint = ("; to accept it anyway, run `zlops nightly --suite S --sha SHA --promote` or trigger the DAG with "
                "promote: true")
        return PromotionDecision(False, why + hint, False, base_key)
    if current is None:
        return PromotionDecision(True, f"the suite's first baseline on {ctx.suite.branch}", False, None)
    same = "the same commit as" if current.sha == run.sha else "newer than"
    return PromotionDecision(True, f"commit {run.sha[:7]} is on {ctx.suite.branch} and {same} the current "
                                   f"baseline {current.sha[:7]} ({current.run_key})", False, base_key)


def current_baseline(accepted: list[RunRecord], position: dict[str, int], *, exclude: str) -> RunRecord | None:
    """The accepted run whose commit is newest on the branch line (ties: the newest started).

    ``accepted`` comes newest started first; runs off the line (a forced backfill of a side commit)
    are not the line's baseline.
    """
    on_line = [r for r in accepted if r.run_key != exclude and r.sha in position]
    if not on_line:
        return None
    return min(on_line, key=lambda r: position[r.sha])  # min() keeps the first (newest started) of a tie


def _share_refusal(ctx: RunContext, shards: list[Any]) -> str:
    """Why the night's shards do not make a baseline ('' when every pool has ``promote_min_ok_share``
    of its planned shards OK); a planned shard never recorded counts as not OK."""
    need = ctx.config.promote_min_ok_share
    ok = {(o.pool, o.device) for o in shards if o.status is ShardStatus.OK}
    state = {(o.pool, o.device): o.status.value for o in shards}
    short = []
    for pool in ctx.suite.pools:
        planned = [(pool, d) for d in ctx.pool_devices(pool)]
        good = sum(1 for key in planned if key in ok)
        if planned and good < need * len(planned) - 1e-9:
            bad = sorted({state.get(key, "never recorded") for key in planned if key not in ok})
            short.append(f"{good} of {len(planned)} shards of pool {pool} ended OK ({', '.join(bad)} the rest)")
    if not short:
        return ""
    rule = "every shard" if need >= 1 else f"at least {need:.0%} of each pool's shards"
    return f"{'; '.join(short)}: a baseline needs {rule} OK (promote_min_ok_share {need:g})"


def _caliber_refusal(rows: list[Any]) -> str:
    incomparable = [c for c in rows if c.verdict is Verdict.INCOMPARABLE]
    allowed = [c for c in rows if c.verdict is not Verdict.INCOMPARABLE and CALIBER_MARK in (c.judgement.note or "")]
    if not incomparable and not allowed:
        return ""
    first = next(iter(incomparable or allowed))
    detail = next((part.strip() for part in first.judgement.note.split(";") if CALIBER_MARK in part), "")
    what = (f"{len(incomparable)} series INCOMPARABLE with their baseline" if incomparable else
            f"{len(allowed)} series judged across a caliber difference (--allow-caliber-mismatch)")
    return f"caliber break: {what}" + (f" ({detail})" if detail else "")


def _line_refusal(run: RunRecord, branch: str, position: dict[str, int], current: RunRecord | None) -> str:
    if not position:
        return ""  # the reason is already given (the line could not be read)
    if run.sha not in position:
        return (f"commit {run.sha[:7]} is not on {branch}'s first-parent line (a side branch, a PR or a commit "
                f"older than the {len(position)} commits zlops reads): measured and reported, never promoted")
    if current is not None and position[run.sha] > position[current.sha]:
        return (f"commit {run.sha[:7]} is older than the current baseline {current.sha[:7]} ({current.run_key}) "
                f"on {branch}: a run of an older commit is measured and reported, never promoted")
    return ""
