"""The ``zlops`` command line: the same library code paths the DAGs call.

Owns the parser and the core commands (:mod:`.app`), one module per command group (:mod:`.alerts`:
``zlops alert``, :mod:`.bisect`: ``zlops bisect``, :mod:`.digest`: ``zlops digest``) and what they share
(:mod:`.common`: exit codes, the config a command reads, argparse types). :func:`main` is the
``zlops.cli:main`` entry point; ``python -m zlops.cli`` runs it too.

May import: every layer below, the Airflow glue included (``zlops airflow pools``, ``zlops forge serve``'s
trigger); nothing in zlops imports it but ``zlops.__main__`` (the layers in docs/design/layers.md;
tests/test_layers.py enforces them).
"""

from __future__ import annotations

from zlops.cli.app import main

__all__ = ["main"]
