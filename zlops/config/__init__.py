"""The zlops configuration: one typed settings object, validated at the edge (docs/config.md).

:mod:`.settings` holds it (the models, :func:`load_config`, :func:`config_from_env`), :mod:`.errors`
turns pydantic's report into sentences, :mod:`.path` finds the file a command reads. This ``__init__``
stays light (the CLI imports :mod:`.path` at start, without pydantic) and hands the public names of
``zlops.config`` on from :mod:`.settings` on first use, so ``from zlops.config import
config_from_env`` in a DAG file keeps working.

May import: backends, :mod:`zlops.bisect.search`, host, formats, kernels and the vocabulary (it validates
against them); never the store or anything above (the layers in docs/design/layers.md; tests/test_layers.py
enforces them).
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    settings = importlib.import_module("zlops.config.settings")
    try:
        return getattr(settings, name)
    except AttributeError:
        raise AttributeError(f"module 'zlops.config' has no attribute {name!r}") from None
