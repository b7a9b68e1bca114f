"""An alert's attribution from the store: the one call every surface makes (CLI, Slack, inbox, series page).

:func:`alert_attribution` reads the inventories of the alert's baseline commit (the newest accepted
nightly of the suite at ``first_base_sha``) and of the night that opened it, on the alert's pool, and
hands them to :func:`zlops.kernels.attribution.attribute`. An alert the judge later confirmed worse again
(a ``worsened`` step: another commit made the same series slower) is attributed step by step: the opening
night against its base, then its newest worsening night against the base that night compared with (on the
H200, hold-out 2: a wrapper change opened the alert, "outside the kernels", and a kernel change made it 18%
worse; the alert's line must name the kernel). The caller owns the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zlops import metrics
from zlops.alerts.lifecycle import Alert
from zlops.kernels.attribution import NO_INVENTORY, Attribution, attribute, identity_changes
from zlops.kernels.inventory import merge

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from zlops.config.settings import Config


def kernels_setting(config: Config | None, suite: str) -> Any:
    """The suite's ``kernels`` section (None: the suite declares no toolchain, or is not in the config)."""
    if config is None or suite not in config.suites:
        return None
    return config.suites[suite].kernels


def _no_toolchain(config: Config | None, alert: Alert) -> Attribution | None:
    """The line for a suite that declares no kernel toolchain (None: it declares one, or is not configured)."""
    if config is not None and alert.suite in config.suites and kernels_setting(config, alert.suite) is None:
        return Attribution(NO_INVENTORY, f"no inventory: suite {alert.suite} declares no kernel toolchain "
                                         "(kernels: triton records one)")
    return None


def _step(session: Session, alert: Alert, config: Config | None, head_run: str, base_sha: str | None,
          memo: dict[tuple[str, str], Any]) -> Attribution:
    """One night's step of ``alert``: the night ``head_run`` against the nightly standing for ``base_sha``.
    ``memo``: (run_key, pool) -> inventories already read (a page of alerts reads each night once)."""
    from zlops.store.kernels import pool_inventory, run_at

    def read(run_key: str) -> Any:
        if (run_key, alert.pool) not in memo:
            memo[(run_key, alert.pool)] = pool_inventory(session, run_key, alert.pool)
        return memo[(run_key, alert.pool)]

    base_key = run_at(session, alert.suite, base_sha, before_run=head_run) if base_sha else None
    return _attribute_step(alert, kernels_setting(config, alert.suite), read(head_run),
                           read(base_key) if base_key else None)


def alert_attribution(session: Session, alert: Alert, config: Config | None, *,
                      memo: dict[tuple[str, str], Any] | None = None,
                      steps: dict[int, Any] | None = None) -> Attribution:
    """What changed for ``alert``'s op between its baseline night and the night that opened it, and, when the
    judge later confirmed it worse again, between that night and its base (``opened at A..B: ...; worse again
    at B..C, +18.20%: ...``; the kind is the newest step's). ``memo``: (run_key, pool) -> inventories already
    read (a page of alerts reads each night once); ``steps``: :func:`zlops.store.kernels.worsened_steps` of a
    page, read once."""
    from zlops.store.kernels import worsened_steps

    if (none := _no_toolchain(config, alert)) is not None:
        return none
    memo = {} if memo is None else memo
    opened = _step(session, alert, config, alert.opened_run, alert.first_base_sha, memo)
    if steps is None:
        steps = worsened_steps(session, [alert.id])
    worse = steps.get(alert.id)
    if worse is None or worse.run_key == alert.opened_run:
        return opened
    later = _step(session, alert, config, worse.run_key, worse.base_sha, memo)
    change = "" if worse.change_pct is None else f", {worse.change_pct:+.2f}%"
    span = f"{worse.base_sha[:7]}..{worse.head_sha[:7]}" if worse.base_sha else worse.head_sha[:7]
    return Attribution(later.kind, f"opened at {alert.commit_range}: {opened.text}; worse again at {span}{change}: "
                                   f"{later.headline}", later.identity)


def _attribute_step(alert: Alert, setting: Any, head: Any, base: Any) -> Attribution:
    """:func:`zlops.kernels.attribution.attribute` of one night (``head``) against its base night, both as
    :func:`zlops.store.kernels.pool_inventory` reads them (None: nothing stored). A reference implementation's
    timing (FlagGems' ``latency_base``: torch's) is not attributed to the suite's kernels (seen on hold-out 2: a
    watch alert on torch's sum timing read "kernel code changed: sum_dim_kernel_non_inner", FlagGems' kernel);
    the run identity differences are still said."""
    base_inv = merge(base.inventories) if base else None
    head_inv = merge(head.inventories) if head else None
    ident = identity_changes(base.identity if base else None, head.identity if head else None,
                             base_inv=base_inv, head_inv=head_inv,
                             base_telemetry=base.telemetry if base else None,
                             head_telemetry=head.telemetry if head else None)
    reference = metrics.reference_timing(alert.metric)
    if reference is not None:
        return Attribution(NO_INVENTORY, f"no inventory: {alert.metric} is {reference}", ident)
    return attribute(base_inv, head_inv, alert.family, mapping=setting.map if setting is not None else None,
                     identity=ident)


def step_attribution(session: Session, alert: Alert, config: Config | None, *, head_run: str,
                     base_sha: str | None, memo: dict[tuple[str, str], Any] | None = None) -> Attribution:
    """One night's step of ``alert`` alone (the night ``head_run`` against ``base_sha``): what a thread reply
    about that night says (a worsening announced in the alert's thread). ``memo`` as for :func:`alert_attribution`."""
    if (none := _no_toolchain(config, alert)) is not None:
        return none
    return _step(session, alert, config, head_run, base_sha, {} if memo is None else memo)


def attribution_texts(session: Session, alerts: list[Alert], config: Config | None) -> dict[int, str]:
    """alert id -> its attribution line, for a page of alerts (their worsening steps read in one statement)."""
    from zlops.store.kernels import worsened_steps

    memo: dict[tuple[str, str], Any] = {}
    steps = worsened_steps(session, [a.id for a in alerts])
    return {a.id: alert_attribution(session, a, config, memo=memo, steps=steps).text for a in alerts}
