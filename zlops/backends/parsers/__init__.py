"""Pure parsers of vendor device tools' text output: text in, typed values out, no I/O.

One module per tool (``nvidia_smi``, ``npu_smi``, ``mthreads_gmi``, ``rocm_smi``), each tested on
recorded real output in ``tests/data/<tool>/`` (see the PROVENANCE.md there). The helpers here are
the few rules every tool shares: a number may carry a unit glued on or spaced off, and "not
available" has many spellings.
"""

from __future__ import annotations

import re

#: Cell values that mean "this device does not report it" (nvidia-smi, rocm-smi, mthreads-gmi spellings).
NOT_AVAILABLE = frozenset({
    "", "n/a", "[n/a]", "na", "-", "[not supported]", "not supported", "[unknown error]",
    "[requested functionality has been deprecated]", "[insufficient permissions]", "[gpu is lost]",
})

_NUMBER = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%/]*)\s*$")

#: Factors to MiB for memory units; MB as printed by npu-smi and nvidia-smi is MiB in practice.
_TO_MIB = {"b": 1 / 2**20, "kib": 1 / 1024, "kb": 1 / 1024, "mib": 1.0, "mb": 1.0, "gib": 1024.0, "gb": 1024.0}


def is_missing(cell: str | None) -> bool:
    """True for an empty cell or any "not available" spelling."""
    return cell is None or cell.strip().lower() in NOT_AVAILABLE


def number(cell: str | None) -> float | None:
    """The number in ``cell`` with any unit stripped (``"36C"``, ``"1888MHz"``, ``"78.06 W"``, ``"0 %"``).

    None for a "not available" spelling or for text that is not a number with an optional unit.
    """
    if is_missing(cell):
        return None
    assert cell is not None
    m = _NUMBER.match(cell)
    return float(m.group(1)) if m else None


def mib(cell: str | None, unit: str | None = None) -> float | None:
    """A memory amount in MiB; the unit comes from the cell (``"1339MiB"``) or from ``unit`` (a key's ``(B)``)."""
    if is_missing(cell):
        return None
    assert cell is not None
    m = _NUMBER.match(cell)
    if not m:
        return None
    u = (m.group(2) or unit or "MiB").lower()
    factor = _TO_MIB.get(u)
    return float(m.group(1)) * factor if factor is not None else None


__all__ = ["NOT_AVAILABLE", "is_missing", "mib", "number"]
