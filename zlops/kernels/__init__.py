"""Kernel inventory per shard and attribution per alert (issue 25): see docs/kernels.md.

:mod:`.inventory` (the values and ``kernels.json``), :mod:`.triton` (the Triton cache parser),
:mod:`.providers` (one provider per toolchain), :mod:`.attribution` (what changed for an alert's op).
"""

from __future__ import annotations
