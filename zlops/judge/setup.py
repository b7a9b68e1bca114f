"""The judging setup of a run: built once from the config, stored with the run, read back from it.

Thresholds, the judge's name, the noise policy and the caliber override decide every verdict. They
are validated once at the edge (the YAML config, :mod:`zlops.config.settings`), turned into one frozen
:class:`JudgingSetup` here, and stored in the run's meta (``judging``) by the compare step, so a
report, a rescore or ``zlops report`` of an old run reads what was applied then, not today's config.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zlops.model import Thresholds

if TYPE_CHECKING:
    from zlops.config.settings import Config
    from zlops.stats import Policy

#: the run meta key the setup is stored under
META_KEY = "judging"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class JudgingSetup:
    """What a run was judged with: ``judge`` ("simple" or "noise"), thresholds, the noise policy."""

    judge: str
    thresholds: Thresholds
    policy: Policy | None = None
    allow_caliber_mismatch: bool = False

    def __post_init__(self) -> None:
        if self.judge not in ("simple", "noise"):
            raise ValueError(f"JudgingSetup.judge: expected simple or noise, got {self.judge!r}")
        if self.judge == "noise" and self.policy is None:
            raise ValueError("JudgingSetup.policy: the noise judge needs a policy")

    @property
    def pcts(self) -> tuple[float, float]:
        return (self.thresholds.potential_pct, self.thresholds.regression_pct)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "judge": self.judge,
                "thresholds": {"potential_pct": self.thresholds.potential_pct,
                               "regression_pct": self.thresholds.regression_pct},
                "policy": None if self.policy is None else dataclasses.asdict(self.policy),
                "allow_caliber_mismatch": self.allow_caliber_mismatch}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgingSetup:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"judging setup: schema_version {version!r} is not {SCHEMA_VERSION}")
        t = data["thresholds"]
        policy = None
        if data.get("policy") is not None:
            from zlops.stats import Policy

            known = {f.name for f in dataclasses.fields(Policy)}
            policy = Policy(**{k: v for k, v in data["policy"].items() if k in known})
        return cls(str(data["judge"]), Thresholds(float(t["potential_pct"]), float(t["regression_pct"])), policy,
                   bool(data.get("allow_caliber_mismatch", False)))


def from_config(config: Config) -> JudgingSetup:
    """The setup today's config gives (validated once, here)."""
    thresholds = config.thresholds_value()
    policy = config.noise.policy(thresholds) if config.judge == "noise" else None
    return JudgingSetup(config.judge, thresholds, policy, config.allow_caliber_mismatch)


def for_run(meta: Mapping[str, Any] | None, config: Config) -> tuple[JudgingSetup, str]:
    """The setup a run was judged with (from its meta), else today's config; and a note saying which."""
    stored = (meta or {}).get(META_KEY)
    if stored:
        try:
            return JudgingSetup.from_dict(stored), "judged with the setup stored with the run"
        except (KeyError, TypeError, ValueError) as exc:
            return from_config(config), f"the run's stored judging setup is unreadable ({exc}); today's config used"
    return from_config(config), "the run stored no judging setup (before zlops 0.2); today's config used"
