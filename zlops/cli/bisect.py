"""``zlops bisect --config F ALERT_ID``: bisect (or resume the bisection of) a confirmed regression by hand.

Exit 0: the bisection finished (found, unverified, ambiguous, not reproduced; its reply is queued in the
alert's thread and sent when a Slack token is set); 75: paused (tonight's budget spent, or it yielded to
a nightly): run it again to resume from the stored steps; 2: a bad alert id or nothing to bisect; 1: an
error (unknown alert, no range, a database fault).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from zlops.config.path import CONFIG_HELP

EXIT_PAUSED = 75  # sysexits EX_TEMPFAIL: try again later


def cmd_bisect(args: argparse.Namespace) -> int:
    from zlops.bisect import messages as bisect_messages
    from zlops.bisect.run import NothingToBisect, bisect_alert, validate_alert_id
    from zlops.bisect.search import State
    from zlops.cli.common import EXIT_OK, EXIT_USAGE, config_of
    from zlops.errors import ZlopsError
    from zlops.slack.outbox import client_for, flush_outbox
    from zlops.steps.context import open_store

    try:
        alert_id = validate_alert_id(args.alert_id)
    except ZlopsError as exc:
        print(f"zlops: {exc}", file=sys.stderr)
        return EXIT_USAGE
    config = config_of(args)
    try:
        out = bisect_alert(config, alert_id)
    except NothingToBisect as exc:
        print(f"zlops: nothing to bisect: {exc}", file=sys.stderr)
        return EXIT_USAGE
    store = open_store(config)
    for line in bisect_messages.show_lines(out.bisection, store.bisection_steps(out.bisection.id)):
        print(line)
    if out.bisection.state is State.PAUSED:
        print(f"paused: {out.result.reason}; run `zlops bisect {alert_id}` again to resume from the stored steps")
        return EXIT_PAUSED
    if out.queued:
        client: Any = client_for(config.slack)
        if client is None:
            print("reply queued in the alert's Slack thread; the next flush sends it (zlops alert flush)")
        else:
            report = flush_outbox(store, client)
            print(f"reply in the alert's Slack thread: {report.line()}")
    return EXIT_OK


def add_bisect_parser(sub: Any) -> None:
    p = sub.add_parser("bisect", help="bisect a confirmed regression alert: find and verify its culprit commit")
    p.add_argument("alert_id", help="the alert's id (zlops alert list)")
    p.add_argument("--config", help=CONFIG_HELP)
    p.set_defaults(func=cmd_bisect)
