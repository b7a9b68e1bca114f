"""The one registry of units and their semantics: kind, scale and which direction is better.

Every parser, the judge and every report asks this module what a unit means; nothing downstream
guesses direction from a metric or unit name (STYLE rule 8). A results file may *declare*
``lower_is_better``, but for a unit with an inherent direction the registry wins and a
contradicting declaration is an error, so a typo in a harness cannot silently flip a verdict.
Anchor: conbench ``units.py`` (a closed lookup table with ``less_is_better`` and a long name).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

Kind = Literal["time", "bandwidth", "throughput", "ratio", "count", "memory", "other"]
KINDS: tuple[str, ...] = get_args(Kind)


class UnknownUnit(ValueError):
    """A unit symbol that is not in the registry; the message lists the known ones."""


@dataclass(frozen=True)
class Unit:
    """One unit: ``value * scale`` is the same quantity expressed in ``base``.

    ``kind`` groups units for display; ``base`` is the canonical unit conversions go through, so
    two units convert only when they share it (TFLOPS and items/s are both throughput, but one
    is not a multiple of the other). ``lower_is_better`` is None for units with no inherent
    direction (a count, a percentage): a results file using them must declare the direction.
    """

    symbol: str
    long_name: str
    kind: Kind
    base: str
    scale: float
    lower_is_better: bool | None
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.symbol or self.symbol != self.symbol.strip():
            raise ValueError(f"Unit.symbol: expected a non-empty symbol without spaces around it, "
                             f"got {self.symbol!r}")
        if self.kind not in KINDS:
            raise ValueError(f"Unit.kind: expected one of {', '.join(KINDS)}, got {self.kind!r}")
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"Unit.scale: expected a positive finite number, got {self.scale!r}")

    @property
    def direction(self) -> str:
        """Human wording of the direction, for messages and docs."""
        if self.lower_is_better is None:
            return "declared by the file"
        return "lower is better" if self.lower_is_better else "higher is better"


_KB, _MB, _GB, _TB = 1e3, 1e6, 1e9, 1e12
_KIB, _MIB, _GIB = 2.0**10, 2.0**20, 2.0**30

#: The registry, in the order the docs list it.
UNITS: tuple[Unit, ...] = (
    Unit("s", "seconds", "time", "s", 1.0, True, ("sec",)),
    Unit("ms", "milliseconds", "time", "s", 1e-3, True, ("msec",)),
    Unit("us", "microseconds", "time", "s", 1e-6, True, ("µs", "μs", "usec")),
    Unit("ns", "nanoseconds", "time", "s", 1e-9, True, ("nsec",)),
    Unit("B/s", "bytes per second", "bandwidth", "B/s", 1.0, False),
    Unit("KB/s", "kilobytes per second (10^3)", "bandwidth", "B/s", _KB, False),
    Unit("MB/s", "megabytes per second (10^6)", "bandwidth", "B/s", _MB, False),
    Unit("GB/s", "gigabytes per second (10^9)", "bandwidth", "B/s", _GB, False),
    Unit("TB/s", "terabytes per second (10^12)", "bandwidth", "B/s", _TB, False),
    Unit("KiB/s", "kibibytes per second (2^10)", "bandwidth", "B/s", _KIB, False),
    Unit("MiB/s", "mebibytes per second (2^20)", "bandwidth", "B/s", _MIB, False),
    Unit("GiB/s", "gibibytes per second (2^30)", "bandwidth", "B/s", _GIB, False),
    Unit("FLOPS", "floating-point operations per second", "throughput", "FLOPS", 1.0, False,
         ("FLOP/s",)),
    Unit("GFLOPS", "10^9 floating-point operations per second", "throughput", "FLOPS", _GB, False,
         ("GFLOP/s",)),
    Unit("TFLOPS", "10^12 floating-point operations per second", "throughput", "FLOPS", _TB, False,
         ("TFLOP/s",)),
    Unit("ops/s", "operations per second", "throughput", "ops/s", 1.0, False, ("op/s",)),
    Unit("items/s", "items per second", "throughput", "items/s", 1.0, False, ("i/s",)),
    Unit("x", "speedup factor (baseline / measured)", "ratio", "x", 1.0, False,
         ("\u00d7",)),  # the multiplication sign, as harnesses print it
    Unit("%", "percent", "ratio", "%", 1.0, None),
    Unit("eff", "parallel efficiency (1 = perfect strong scaling)", "ratio", "eff", 1.0, False),
    Unit("t/t", "time ratio (numerator / denominator)", "ratio", "t/t", 1.0, True),
    Unit("count", "count (dimensionless)", "count", "count", 1.0, None),
    Unit("B", "bytes", "memory", "B", 1.0, True),
    Unit("KB", "kilobytes (10^3)", "memory", "B", _KB, True),
    Unit("MB", "megabytes (10^6)", "memory", "B", _MB, True),
    Unit("GB", "gigabytes (10^9)", "memory", "B", _GB, True),
    Unit("KiB", "kibibytes (2^10)", "memory", "B", _KIB, True),
    Unit("MiB", "mebibytes (2^20)", "memory", "B", _MIB, True),
    Unit("GiB", "gibibytes (2^30)", "memory", "B", _GIB, True),
)


def _index(units: tuple[Unit, ...]) -> dict[str, Unit]:
    index: dict[str, Unit] = {}
    for unit in units:
        for name in (unit.symbol, *unit.aliases):
            if name in index:
                raise ValueError(f"unit registry: {name!r} is defined twice")
            index[name] = unit
    return index


_BY_NAME: dict[str, Unit] = _index(UNITS)


def unit_symbols() -> list[str]:
    """The canonical symbols, in registry order (aliases excluded)."""
    return [u.symbol for u in UNITS]


def unit_info(symbol: str) -> Unit:
    """Look a unit up by symbol or alias (case-sensitive: ``MB`` is not ``Mb``, ``ms`` not ``Ms``).

    Raises :class:`UnknownUnit` (a ``ValueError``) listing the known symbols.
    """
    try:
        return _BY_NAME[symbol]
    except (KeyError, TypeError):
        raise UnknownUnit(f"unknown unit {symbol!r}; known units: {', '.join(unit_symbols())} "
                          f"(aliases: {', '.join(_aliases())})") from None


def _aliases() -> list[str]:
    return [f"{a}={u.symbol}" for u in UNITS for a in u.aliases]


def has_direction(unit: str) -> bool:
    """Whether ``unit`` has an inherent direction (else a file must declare ``lower_is_better``)."""
    return unit_info(unit).lower_is_better is not None


def lower_is_better(unit: str, declared: bool | None = None) -> bool:
    """The direction of ``unit``: the registry decides; a file's declaration only fills gaps.

    For a unit with an inherent direction, ``declared`` may be omitted or must agree; a
    contradiction raises ``ValueError``. For a direction-less unit (``count``, ``%``) the
    declaration is required, since guessing would make half the verdicts backwards.
    """
    info = unit_info(unit)
    if info.lower_is_better is None:
        if declared is None:
            raise ValueError(f"unit {info.symbol!r} ({info.long_name}) has no inherent direction; "
                             f"declare lower_is_better: true or false")
        return declared
    if declared is not None and declared != info.lower_is_better:
        raise ValueError(f"lower_is_better={str(declared).lower()} contradicts unit {info.symbol!r} "
                         f"({info.long_name}: {info.direction}); drop the declaration or fix the unit")
    return info.lower_is_better


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """Convert ``value`` between two units of the same base (``ms`` -> ``us``, ``GiB/s`` -> ``GB/s``)."""
    src, dst = unit_info(from_unit), unit_info(to_unit)
    if src.base != dst.base:
        raise ValueError(f"cannot convert {src.symbol!r} ({src.kind}, in {src.base}) to "
                         f"{dst.symbol!r} ({dst.kind}, in {dst.base}): not the same quantity")
    if src is dst:
        return float(value)
    return float(value) * src.scale / dst.scale


def format_value(value: float, unit: str, *, digits: int = 4) -> str:
    """Compact human text for ``value`` in ``unit``: ``digits`` significant digits, no rescaling.

    The unit is never changed (a compare row shows base and head in the same unit); large values
    are written as integers rather than in exponent form, tiny ones in exponent form.
    """
    info = unit_info(unit)
    v = float(value)
    if not math.isfinite(v):
        number = str(v)
    elif v == 0:
        number = "0"
    elif abs(v) >= 10**digits and abs(v) < 1e15:
        number = f"{v:.0f}"
    elif abs(v) < 1e-3:
        number = f"{v:.{digits - 1}e}"
    else:
        number = f"{v:.{digits}g}"
    if info.symbol in ("%", "x"):
        return f"{number}{info.symbol}"
    return f"{number} {info.symbol}"


def _factor_text(scale: float) -> str:
    if scale == 1:
        return "1"
    for radix in (10, 2):
        exponent = round(math.log(scale, radix))
        if math.isclose(float(radix) ** exponent, scale, rel_tol=1e-12):
            return f"{radix}^{exponent}"
    return f"{scale:g}"


@dataclass(frozen=True)
class Derived:
    """A metric computed from another metric of the same case and measurement, declared as data.

    ``metric`` (say FlagGems ``speedup`` = ``latency_base / latency``, ``tflops`` = FLOPs / ``latency``)
    is a function of ``source`` (the timing it comes from): ``metric`` moves as ``source ** power`` when
    nothing else moves (``power`` -1 for a rate or a speedup, +1 for a time). It gets the verdict of its
    source and the same change as a ratio (:mod:`zlops.judge.derived`), and opens no alert of its own. A
    reference implementation's own timing (FlagGems ``latency_base``) is not derived: it is its own series.
    """

    metric: str
    source: str
    power: int
    formula: str

    def __post_init__(self) -> None:
        if self.power not in (-1, 1):
            raise ValueError(f"Derived.power: expected -1 or 1, got {self.power!r}")
        if not self.metric or not self.source or self.metric == self.source:
            raise ValueError(f"Derived: a metric and a different source, got {self.metric!r} <- {self.source!r}")


#: Derived metrics by name, in the order the docs list them (docs/formats.md "Derived metrics"). A rule
#: applies to a case only where the case has the source series too (same pool); otherwise the metric is
#: judged on its own. Google Benchmark's rates are not here: they divide by the CPU or the real time
#: depending on how the benchmark was registered, which its JSON does not say.
DERIVED: tuple[Derived, ...] = (
    Derived("speedup", "latency", -1, "latency_base / latency (FlagGems); torch's time is its own series"),
    Derived("tflops", "latency", -1, "FLOPs / latency (FlagGems)"),
    Derived("gbps", "latency", -1, "bytes / latency (FlagGems)"),
    Derived("gbps_base", "latency_base", -1, "bytes / latency_base (FlagGems, the torch side)"),
    Derived("bw_execute", "execute_s", -1, "bytes / execute time (collectives)"),
)
_DERIVED: dict[str, Derived] = {d.metric: d for d in DERIVED}
if len(_DERIVED) != len(DERIVED) or any(d.source in _DERIVED for d in DERIVED):
    raise ValueError("metric registry: a derived metric is declared twice, or derived from a derived one")


#: Timings of a reference implementation that a harness measures beside the suite's own (FlagGems' ``latency_base``
#: is torch's time for the same case): series of their own, whose kernels are not the suite's, so no inventory of
#: the suite's compiled kernels says anything about them (zlops.alerts.explain)
REFERENCE_TIMINGS: dict[str, str] = {
    "latency_base": "the reference implementation's own timing (FlagGems: torch's), not the suite's compiled kernels",
}


#: One-time set-up timings: one sample a process (the collectives harness' ``setup_s``: "one-time compile + init +
#: comm setup (first warmup round only)", seeds/001), beside the timings a change is gated on (``execute_s``,
#: ``wall_s``). Judged and reported like any series, but the A/B spends its budget on every timing suspect first
#: (zlops.judge.confirm.choose_bases): on the CPU gloo campaign (run 6, night 5) two shards' set-up suspects
#: (+49%, +33%, one sample each) took the budget from the slowed shard's +99.5% execute_s
SETUP_TIMINGS: dict[str, str] = {
    "setup_s": "one-time compile, init and communicator set-up: one sample a process (the first warm-up round)",
}


#: Other clocks on the same work of a case: the collectives harness times each round twice, ``execute_s`` (the
#: collective) and ``wall_s`` (the round's wall time around it), and ``device_wall_s`` where the device times it
#: (seeds/001). Each is a series judged on its own (a change in the host's work around the collective shows in
#: ``wall_s`` alone), but a regression that both show is one regression of the case: the companion opens no alert
#: where the timing it accompanies has one at least as firm, and that alert's event names it
#: (zlops.alerts.lifecycle). The CPU gloo campaign's slowed variant (run 6b) opened two confirmed alerts,
#: ``execute_s`` +61.06% and ``wall_s`` +74.11%, for one case.
COMPANION_TIMINGS: dict[str, str] = {
    "wall_s": "execute_s",
    "device_wall_s": "execute_s",
}


def companion_of(metric: str) -> str | None:
    """The timing ``metric`` is another clock of (its alert folds into that one's), else None."""
    return COMPANION_TIMINGS.get(metric)


def setup_timing(metric: str) -> str | None:
    """What ``metric`` is when it times a process's one-time set-up rather than the measured work (else None)."""
    return SETUP_TIMINGS.get(metric)


def reference_timing(metric: str) -> str | None:
    """What ``metric`` is when it times a reference implementation rather than the suite (else None)."""
    return REFERENCE_TIMINGS.get(metric)


def derived_from(metric: str) -> Derived | None:
    """The declaration of ``metric`` when it is derived from another metric of its case, else None."""
    return _DERIVED.get(metric)


def derived_table_markdown() -> str:
    """The derived-metrics table of ``docs/formats.md``, rendered from :data:`DERIVED`."""
    lines = ["| metric | follows | moves as | computed as |", "|---|---|---|---|"]
    for d in DERIVED:
        lines.append(f"| `{d.metric}` | `{d.source}` | {'1 / ' if d.power < 0 else ''}`{d.source}` | {d.formula} |")
    return "\n".join(lines) + "\n"


def units_table_markdown() -> str:
    """The units table of ``docs/formats.md``, rendered from the registry (a test keeps them equal)."""
    lines = ["| unit | aliases | meaning | kind | converts to | direction |",
             "|---|---|---|---|---|---|"]
    for u in UNITS:
        aliases = ", ".join(f"`{a}`" for a in u.aliases) or "-"
        factor = _factor_text(u.scale)
        lines.append(f"| `{u.symbol}` | {aliases} | {u.long_name} | {u.kind} | "
                     f"{factor} `{u.base}` | {u.direction} |")
    return "\n".join(lines) + "\n"
