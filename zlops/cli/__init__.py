"""The ``zlops`` command line (docs/design/layers.md)."""

from __future__ import annotations

from zlops.cli.app import main

__all__ = ["main"]
