"""``python -m zlops.cli``: the same command line as ``zlops``."""

from __future__ import annotations

import sys

from zlops.cli.app import main

if __name__ == "__main__":
    sys.exit(main())
