"""What the ``zlops`` commands share: the exit codes, the config a command reads, argparse's number types.

Imported by the parser and core commands (:mod:`zlops.cli.app`) and by each command group's module
(:mod:`zlops.cli.alerts`, :mod:`zlops.cli.bisect`, :mod:`zlops.cli.digest`), which import it rather
than the app that imports them. The exit codes are listed in :mod:`zlops.cli.app`'s docstring.
"""

from __future__ import annotations

import argparse
import os
import sys

from zlops.config.path import ENV_VAR, FoundConfig, find_config

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_FLAGGED, EXIT_CALIBER, EXIT_SHARDS = 0, 1, 2, 3, 4, 5


def found_config(args: argparse.Namespace) -> FoundConfig:
    """The config a command reads: ``--config``, else ``$ZLOPS_CONFIG``, else the first of the files
    :func:`zlops.config.path.find_config` searches (said once on stderr, so a run never reads a config
    nobody named without saying which)."""
    found = getattr(args, "_found_config", None)
    if found is None:
        found = find_config(getattr(args, "config", None))
        args._found_config = found
        if found.searched:
            print(f"zlops: config {found.path} (found without --config or ${ENV_VAR})", file=sys.stderr)
    return found


def config_of(args: argparse.Namespace):
    """The config a command reads (:func:`found_config`), loaded."""
    from zlops.config.settings import load_config

    return load_config(found_config(args).path)


def config_name(args: argparse.Namespace) -> str:
    """The config file a command read, for messages."""
    found = getattr(args, "_found_config", None)
    return str(found.path) if found is not None else str(args.config or os.environ.get(ENV_VAR) or "the config")


def positive(kind: type[int] | type[float], *, zero: bool = False):
    """An argparse type: a number of ``kind`` above 0 (or at least 0 with ``zero``)."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value < 0 or (value == 0 and not zero) or value != value:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what} {'>= 0' if zero else '> 0'}, got {text!r}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse
