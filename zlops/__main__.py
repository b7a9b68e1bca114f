"""``python -m zlops``: the same command line as ``zlops`` (for a venv whose bin/ is not on PATH)."""

from __future__ import annotations

import sys

from zlops.cli import main

if __name__ == "__main__":
    sys.exit(main())
