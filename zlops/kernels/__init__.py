"""Kernel inventory per shard and attribution per alert (issue 25): see docs/kernels.md.

:mod:`.inventory` (the values and ``kernels.json``), :mod:`.triton` (the Triton cache parser),
:mod:`.providers` (one provider per toolchain), :mod:`.attribution` (what changed for an alert's op).

May import: the vocabulary only; the config, the store and the runner use it (the attribution of an alert,
read from the store, is :mod:`zlops.alerts.explain`) (the layers in docs/design/layers.md;
tests/test_layers.py enforces them).
"""

from __future__ import annotations
