"""Helpers of the forge tests (tests/forge): secrets, compare rows and a finished compare's outcome."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from fake_forge import GITHUB_TOKEN, GITLAB_TOKEN

from zlops.config.settings import Config
from zlops.forge.deliver import ForgeSecrets
from zlops.forge.prcompare import PrOutcome, PrPlan, PrRequest
from zlops.model import BaselinePoint, Comparison, Figures, Judgement, RunRecord, RunStatus, Summary, Verdict
from zlops.steps.context import open_store

GH_SECRET = "gh-webhook-secret"
GL_SECRET = "gl-webhook-secret"
HEAD = "a" * 40
BASE = "b" * 40
def secrets_for(forge_cfg: Any) -> ForgeSecrets:
    if forge_cfg.kind == "github":
        return ForgeSecrets(GITHUB_TOKEN, GH_SECRET)
    return ForgeSecrets(GITLAB_TOKEN, GL_SECRET)


def row(case: str, verdict: Verdict, base: float, head: float, *, note: str = "", suite: str = "ops") -> Comparison:
    figures = Figures(reference=base, reference_label="merge-base", value=head, value_label="HEAD",
                      lower_is_better=True, unit="ms", threshold_pct=2.0)
    return Comparison(suite, "local", case, "time", "ms", True, BaselinePoint("pr:base", BASE, "ms", base, 5),
                      Summary(head, 5), Judgement(verdict, None, None, 2.0, note, figures))


def outcome(config: Config, rows: list[Comparison], *, suite: str = "ops", key: str = "pr:ops:1", pr: int | None = 7,
            head: str = HEAD, errors: tuple[str, ...] = ()) -> PrOutcome:
    """A finished compare as run_compare returns it, with its head run stored (the outbox needs it)."""
    req = PrRequest(suite, "feature/x", "local", pr=pr)
    plan = PrPlan(req, "compare", head, BASE, BASE, 1, (0,), f"{key}:head", f"{key}:base")
    now = datetime.now(timezone.utc)
    open_store(config).upsert_run(RunRecord(run_key=plan.head_key, kind="pr", suite=suite, sha=head,
                                            branch="feature/x", status=RunStatus.DONE, started_at=now,
                                            finished_at=now, meta={}))
    return PrOutcome(plan, {"default": rows}, {"default": []}, None, errors)
