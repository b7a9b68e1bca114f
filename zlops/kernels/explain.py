"""An alert's attribution from the store: the one call every surface makes (CLI, Slack, inbox, series page).

:func:`alert_attribution` reads the inventories of the alert's baseline commit (the newest accepted
nightly of the suite at ``first_base_sha``) and of the night that opened it, on the alert's pool, and
hands them to :func:`zlops.kernels.attribution.attribute`. The caller owns the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zlops.alerts import Alert
from zlops.kernels.attribution import NO_INVENTORY, Attribution, attribute, identity_changes
from zlops.kernels.inventory import merge

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from zlops.config import Config


def kernels_setting(config: Config | None, suite: str) -> Any:
    """The suite's ``kernels`` section (None: the suite declares no toolchain, or is not in the config)."""
    if config is None or suite not in config.suites:
        return None
    return config.suites[suite].kernels


def alert_attribution(session: Session, alert: Alert, config: Config | None, *,
                      memo: dict[tuple[str, str], Any] | None = None) -> Attribution:
    """What changed for ``alert``'s op between its baseline night and the night that opened it.
    ``memo``: (run_key, pool) -> inventories already read (a page of alerts reads each night once)."""
    from zlops.store.kernels import pool_inventory, run_at

    setting = kernels_setting(config, alert.suite)
    if config is not None and alert.suite in config.suites and setting is None:
        return Attribution(NO_INVENTORY, f"no inventory: suite {alert.suite} declares no kernel toolchain "
                                         "(kernels: triton records one)")
    memo = {} if memo is None else memo

    def read(run_key: str) -> Any:
        if (run_key, alert.pool) not in memo:
            memo[(run_key, alert.pool)] = pool_inventory(session, run_key, alert.pool)
        return memo[(run_key, alert.pool)]

    head = read(alert.opened_run)
    base_key = run_at(session, alert.suite, alert.first_base_sha, before_run=alert.opened_run)
    base = read(base_key) if base_key else None
    base_inv = merge(base.inventories) if base else None
    head_inv = merge(head.inventories) if head else None
    ident = identity_changes(base.identity if base else None, head.identity if head else None,
                             base_inv=base_inv, head_inv=head_inv,
                             base_telemetry=base.telemetry if base else None,
                             head_telemetry=head.telemetry if head else None)
    return attribute(base_inv, head_inv, alert.family, mapping=setting.map if setting is not None else None,
                     identity=ident)


def attribution_texts(session: Session, alerts: list[Alert], config: Config | None) -> dict[int, str]:
    """alert id -> its attribution line, for a page of alerts."""
    memo: dict[tuple[str, str], Any] = {}
    return {a.id: alert_attribution(session, a, config, memo=memo).text for a in alerts}
