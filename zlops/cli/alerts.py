"""``zlops alert``: list regression alerts and set the states only people set.

``zlops alert list [--suite S] [--all]``, ``zlops alert show ID``, and
``zlops alert ack|expected|false-positive|wontfix ID [--note TEXT] [--by NAME]``. A person's change
is recorded with its note, and its reply is queued in the alert's Slack thread; with a bot token in
the environment (``slack.token_env``) it is sent at once, else by the next flush. ``zlops alert flush``
sends whatever the outbox holds (the ``zlops_outbox`` DAG runs it every 15 minutes). After
``ack`` or ``expected`` the nightly records further worsening without announcing it; after
``false-positive`` or ``wontfix`` the alert is closed (a later regression opens a new one).
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import TYPE_CHECKING, Any

# only what the parser needs at import (`zlops --help` must not load the store): the rest is imported
# by the command that runs
from zlops.alerts.lifecycle import ACTIONS
from zlops.config.path import CONFIG_HELP

if TYPE_CHECKING:
    from zlops.alerts.lifecycle import Alert

#: CLI verb -> state (the inbox's actions: zlops.alerts.lifecycle.ACTIONS).
VERBS = ACTIONS


def _line(a: Alert) -> str:
    change = "-" if a.last_change_pct is None else f"{a.last_change_pct:+.2f}%"
    thread = "thread" if a.thread_notification_id is not None else "no thread"
    return (f"#{a.id:<5} {a.state.value:<14} {change:>9}  {a.suite} / {a.pool} / {a.case} ({a.metric})  "
            f"{a.commit_range}  opened {a.opened_at:%Y-%m-%d}  {thread}")


def cmd_alert_list(args: argparse.Namespace) -> int:
    from zlops.alerts.lifecycle import OPEN_STATES
    from zlops.cli.common import EXIT_OK, config_of
    from zlops.steps.context import open_store

    store = open_store(config_of(args), read_only=True)
    alerts = store.alerts(suite=args.suite, states=None if args.all else OPEN_STATES, limit=args.limit)
    for a in alerts:
        print(_line(a))
    if not alerts:
        print("no alerts" if args.all else "no open alerts (--all lists closed ones too)")
    return EXIT_OK


def cmd_alert_show(args: argparse.Namespace) -> int:
    from zlops.alerts.explain import alert_attribution
    from zlops.cli.common import EXIT_OK, config_of
    from zlops.steps.context import open_store

    config = config_of(args)
    store = open_store(config, read_only=True)
    alert = store.alert(args.id)
    print(_line(alert))
    print(f"  kernels: {store.read(alert_attribution, alert, config).text}")
    for e in store.alert_events(args.id):
        what = e["kind"] if e["kind"] != "state" else f"{e['from_state']} -> {e['to_state']}"
        by = e["run_key"] or e["actor"]
        note = f": {e['note']}" if e["note"] else ""
        print(f"  {e['at']:%Y-%m-%d %H:%M}  {what:<28} {by}{' (announced)' if e['announced'] else ''}{note}")
    bisection = store.bisection_of_alert(args.id)
    if bisection is not None:
        from zlops.bisect.messages import show_lines

        for line in show_lines(bisection, store.bisection_steps(bisection.id)):
            print(f"  {line}")
    return EXIT_OK


def cmd_alert_set(args: argparse.Namespace) -> int:
    from zlops.cli.common import EXIT_OK, config_of
    from zlops.slack.outbox import client_for, flush_outbox
    from zlops.steps.context import open_store
    from zlops.triage.actions import change_alert

    config = config_of(args)
    store = open_store(config)
    actor = args.by or os.environ.get("ZLOPS_USER") or getpass.getuser()
    # the same call as the Airflow inbox's buttons: the change and its thread reply in one transaction
    done = change_alert(store, args.id, VERBS[args.verb], note=args.note or "", actor=actor)
    before, after = done.before, done.after
    print(f"alert #{after.id} {after.pool} / {after.case} ({after.metric}): "
          f"{before.state.value} -> {after.state.value}" + (" (already recorded)" if done.repeated else ""))
    queued = done.reply_id
    if queued is None:
        print("  (never announced, so nothing is posted)")
        return EXIT_OK
    client: Any = client_for(config.slack)
    if client is None:
        print("  reply queued in its Slack thread; the next flush sends it (zlops alert flush, zlops_outbox DAG)")
        return EXIT_OK
    report = flush_outbox(store, client)
    print("  reply posted in its Slack thread" if queued in report.sent else
          "  reply queued in its Slack thread (Slack did not take it now; the next flush retries)")
    return EXIT_OK


def cmd_alert_flush(args: argparse.Namespace) -> int:
    """Send what the outbox holds: exit 0 when it is empty afterwards (or only waits on threads)."""
    from zlops.cli.common import EXIT_ERROR, EXIT_OK, config_of
    from zlops.slack.outbox import client_for, flush_outbox
    from zlops.steps.context import open_store

    config = config_of(args)
    forge_failed = False
    if any(s.forge is not None for s in config.suites.values()):  # checks on pull requests (zlops.forge)
        from zlops.forge.lifecycle import flush as flush_checks

        checks = flush_checks(open_store(config), config)
        print(checks.line().replace("outbox:", "forge checks:", 1))
        forge_failed = bool(checks.stopped or checks.failed)
    client: Any = client_for(config.slack)
    if client is None:
        left = len(open_store(config).outbox_items(exclude_kinds=("forge-check",)))
        what = (f"no Slack token in ${config.slack.token_env}" if config.slack else "no slack section in the config")
        if not left:  # nothing waits for Slack: not being able to reach it is no error
            print(f"slack: {what}; no message waits for it")
            return EXIT_ERROR if forge_failed else EXIT_OK
        print(f"zlops: cannot flush the outbox: {what}; {left} message(s) wait", file=sys.stderr)
        return EXIT_ERROR
    report = flush_outbox(open_store(config), client)
    print(report.line())
    return EXIT_ERROR if report.stopped or report.failed or forge_failed else EXIT_OK


def add_alert_parser(sub: Any) -> None:
    """Register ``zlops alert ...`` on the top-level subparsers."""
    from zlops.cli.common import positive

    al = sub.add_parser("alert", help="regression alerts: list them, ack / expected / false-positive / wontfix")
    alsub = al.add_subparsers(dest="alert_command", required=True)
    ls = alsub.add_parser("list", help="open alerts, newest first")
    ls.add_argument("--config", help=CONFIG_HELP)
    ls.add_argument("--suite")
    ls.add_argument("--all", action="store_true", help="closed ones too")
    ls.add_argument("--limit", type=positive(int), default=200)
    ls.set_defaults(func=cmd_alert_list)
    sh = alsub.add_parser("show", help="one alert and its history")
    sh.add_argument("id", type=int)
    sh.add_argument("--config", help=CONFIG_HELP)
    sh.set_defaults(func=cmd_alert_show)
    fl = alsub.add_parser("flush", help="send what the Slack outbox holds (retried messages, replies, summaries)")
    fl.add_argument("--config", help=CONFIG_HELP)
    fl.set_defaults(func=cmd_alert_flush)
    for verb, state in VERBS.items():
        p = alsub.add_parser(verb, help=f"set an open alert to {state.value} (a reply goes to its thread)")
        p.add_argument("id", type=int)
        p.add_argument("--note", help="why (shown in the thread)")
        p.add_argument("--by", help="who (default: $ZLOPS_USER, else the login name)")
        p.add_argument("--config", help=CONFIG_HELP)
        p.set_defaults(func=cmd_alert_set, verb=verb)
