"""``zlops digest``: the trust ledger of the last days, printed and posted to Slack through the outbox.

``zlops digest --config F [--suite S] [--days 7] [--until 2026-11-30T09:00Z] [--print-only]`` prints the
ledger (:func:`zlops.triage.trust.ledger_lines`, what the ``/zlops/trust`` page shows) and queues it as the
weekly digest in the outbox, sent at once when the bot token is in the environment (``slack.token_env``),
else by the next flush. Queuing one window's digest again returns the same message. The ``zlops_digest``
DAG does the same every Monday.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from typing import Any

from zlops.config.path import CONFIG_HELP


def _until(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--until: expected an ISO date or time like 2026-11-30T09:00Z, "
                                         f"got {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def cmd_digest(args: argparse.Namespace) -> int:
    from zlops.cli.common import EXIT_ERROR, EXIT_OK, EXIT_USAGE, config_of
    from zlops.slack.outbox import client_for
    from zlops.steps.context import open_store
    from zlops.triage.trust import ledger, ledger_lines, post_digest

    config = config_of(args)
    if args.suite and args.suite not in config.suites:
        print(f"zlops: unknown suite {args.suite!r}; the config has: {', '.join(sorted(config.suites))}",
              file=sys.stderr)
        return EXIT_USAGE
    if not 1 <= args.days <= 366:
        print(f"zlops: --days: expected 1..366, got {args.days}", file=sys.stderr)
        return EXIT_USAGE
    store = open_store(config)
    if args.print_only or config.slack is None:
        for line in ledger_lines(ledger(store, days=args.days, until=args.until, suite=args.suite)):
            print(line)
        if config.slack is None and not args.print_only:
            print("zlops: not posted: the config has no slack section", file=sys.stderr)
            return EXIT_ERROR
        return EXIT_OK
    client: Any = client_for(config.slack)
    try:
        done = post_digest(store, channel=config.slack.channel, client=client, days=args.days, until=args.until,
                           suite=args.suite)
    except ValueError as exc:
        print(f"zlops: {exc}", file=sys.stderr)
        return EXIT_ERROR
    for line in ledger_lines(done.ledger):
        print(line)
    where = "sent" if done.sent else (f"queued in the outbox (#{done.notification_id}); "
                                      + ("the flush did not send it yet" if client else
                                         f"no Slack token in ${config.slack.token_env}: the next flush sends it"))
    print(f"digest {where}")
    return EXIT_OK


def add_digest_parser(sub: Any) -> None:
    """Register ``zlops digest`` on the top-level subparsers."""
    d = sub.add_parser("digest", help="the trust ledger of the last days (alerts, triage time, precision, "
                                      "measurable share, coverage at both thresholds, recall canaries), posted to "
                                      "Slack through the outbox")
    d.add_argument("--config", help=CONFIG_HELP)
    d.add_argument("--suite", help="one suite (default: all)")
    d.add_argument("--days", type=int, default=7, help="the window, in days before --until (default 7)")
    d.add_argument("--until", type=_until, help="the window's end (ISO; default now, UTC)")
    d.add_argument("--print-only", action="store_true", help="print the ledger, queue nothing")
    d.set_defaults(func=cmd_digest)
