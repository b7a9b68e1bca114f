"""What a text adapter left out, so "parsed fine" can never hide "measured less than it ran".

The registry entry point ``parse(text, *, source)`` returns only case results. Harness logs also
carry things that are *not* results but must not vanish silently: torn ``[STRACE]`` records,
benchmark cases that FAILED or were SKIPPED, FlagGems rows with an ``error_msg``, query-mode
lines. Each adapter that can meet such things also offers ``parse_with_report``, returning a
:class:`ParseReport`: the results plus one :class:`Dropped` entry per item left out, with the
line it was found on. The same counts are stamped into every case's ``params`` (see
:func:`stamp`), so a caller holding only the stored results still sees them.

Anchor: simpler's ``strace_timing.warn_about_lost_records`` (count what was lost, before any
timing is derived, because a torn record is otherwise indistinguishable from a real measurement).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from zlops.model import CaseResult


@dataclass(frozen=True)
class Dropped:
    """One item of the input that produced no sample, and why.

    ``kind`` is a short stable token the adapter documents (``torn_record``, ``failed``,
    ``skipped``, ``error_row`` ...); ``item`` names the thing (a case label, a record excerpt);
    ``line`` is 1-based where the input is line-oriented.
    """

    kind: str
    item: str
    reason: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.kind}: {self.item}: {self.reason}"


@dataclass(frozen=True)
class ParseReport:
    """The results of one file plus everything that was left out of them."""

    results: tuple[CaseResult, ...]
    dropped: tuple[Dropped, ...] = ()

    @property
    def measured_nothing(self) -> bool:
        """True when the file holds no case result at all (the pipeline fails such a shard)."""
        return not self.results

    def counts(self) -> dict[str, int]:
        """``kind -> how many`` for the dropped items, kinds in first-seen order."""
        return dict(Counter(d.kind for d in self.dropped))

    def of_kind(self, *kinds: str) -> tuple[Dropped, ...]:
        return tuple(d for d in self.dropped if d.kind in kinds)

    @property
    def failed(self) -> tuple[Dropped, ...]:
        return self.of_kind("failed")

    @property
    def skipped(self) -> tuple[Dropped, ...]:
        return self.of_kind("skipped")


def stamp(results: Iterable[CaseResult], extra: Mapping[str, Any]) -> tuple[CaseResult, ...]:
    """Copies of ``results`` with ``extra`` merged into each case's params (file-level facts)."""
    return tuple(replace(r, params={**r.params, **extra}) for r in results)
