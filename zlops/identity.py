"""Run identity (the caliber) and the check every comparison makes before it reads a latency.

Two runs on different calibers produce a report that looks exactly like a valid one: no step
errors, the numbers just mean something else. The seed published three such figures: a -8.2%
that was record-vs-record tuning, "945 variants -> 33" that was a shared vs inherited tuner cache,
+43% vs +124.5% that was the timer. So a shard's ``run_identity.json`` records every axis that
changes what a latency means, and :func:`check_caliber` compares both sides' identities first:

- a differing axis, or a missing identity, refuses the comparison (``!!! [caliber]``; CLI exit 4)
  unless explicitly allowed, and what was found is printed either way;
- both sides recording autotune is refused by name (each side tuned on its own: the delta is the
  tuner's, not the code's); record pinning a replay is the normal shape;
- recording on a *shared* tuner cache warns: relative conclusions hold, absolute latencies do not.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zlops import __version__

IDENTITY_FILE = "run_identity.json"
IDENTITY_VERSION = 1

#: axes whose difference makes two measurements incomparable
CALIBER_AXES: tuple[str, ...] = (
    "backend", "device_model", "driver", "toolkit", "timer", "direct_repeat", "rounds", "bench_level",
    "shape_mode", "tuner_cache", "pins", "framework",
)
#: recorded for the report, never a reason to refuse
INFO_AXES: tuple[str, ...] = ("python", "zlops_version", "host", "autotune_mode", "graph_capture_supported",
                              "timer_source", "device_ids")
#: where a run's ``timer`` came from, most trusted first (:func:`resolve_timer`)
TIMER_SOURCES: tuple[str, ...] = ("harness", "config", "format", "backend")


@dataclass(frozen=True)
class CaliberReport:
    """What the caliber check found: differing axes, refusal, warnings."""

    mismatches: tuple[tuple[str, Any, Any], ...]
    refused: bool
    reasons: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    allowed: bool = False
    missing: tuple[str, ...] = field(default=())
    #: both sides recorded their physical devices and they differ (same model: not a refusal, a warning)
    devices_moved: bool = False

    @property
    def ok(self) -> bool:
        return not self.refused or self.allowed

    def lines(self) -> list[str]:
        """``!!! [caliber]`` lines naming each differing axis (empty when nothing was found)."""
        out = [f"!!! [caliber] missing run identity: {m}" for m in self.missing]
        out += [f"!!! [caliber] {axis}: {a!r} != {b!r}" for axis, a, b in self.mismatches]
        out += [f"!!! [caliber] {r}" for r in self.reasons]
        out += [f"warning [caliber] {w}" for w in self.warnings]
        if (self.mismatches or self.reasons or self.missing) and self.allowed:
            out.append("!!! [caliber] comparison allowed by --allow-caliber-mismatch; the deltas may measure the "
                       "difference above, not the code")
        return out


def read_pins(worktree: Path, pins: Sequence[str]) -> dict[str, str]:
    """Pinned revisions a suite declares (e.g. ``pto_isa.pin``): file -> stripped content."""
    out = {}
    for rel in pins:
        p = (worktree / rel).resolve()
        if worktree.resolve() not in p.parents:
            raise ValueError(f"pin file {rel!r} is outside the worktree")
        out[rel] = "".join(p.read_text(encoding="utf-8").split()) if p.exists() else "<missing>"
    return out


def resolve_timer(*, harness: Mapping[str, Any] | None, configured: str | None, from_format: str | None,
                  backend_default: str | None) -> tuple[str | None, str]:
    """The timer a shard's latencies were measured with, and its source (one of :data:`TIMER_SOURCES`).

    Most trusted first: what the harness wrote into its ``run_identity.json`` (it timed), the
    suite's ``timer:`` (the operator declared it), what the results file says (FlagGems' record
    ``mode``: ``kernel`` is ``triton.do_bench``), and last the backend's default timer, which is
    zlops.timing's and describes only harnesses that time with it. Recording ``graph`` for a
    harness that timed with ``do_bench`` made two different calibers look alike (issue 11)."""
    if harness and harness.get("timer"):
        return str(harness["timer"]), "harness"
    if configured:
        return configured, "config"
    if from_format:
        return from_format, "format"
    return backend_default, "backend"


def build_identity(*, backend_identity: Mapping[str, Any], rounds: int, pins: Mapping[str, str],
                   harness: Mapping[str, Any] | None = None, direct_repeat: int = 1,
                   configured_timer: str | None = None, format_timer: str | None = None) -> dict[str, Any]:
    """A shard's identity: the backend's part, zlops's part and what the harness declared.

    The harness (e.g. the zlops pytest plugin, or any harness writing ``{artifacts}/run_identity.json``)
    wins for the axes it knows (timer, direct_repeat, bench_level, shape_mode, tuner_cache,
    autotune_mode, framework); zlops fills the rest. The timer is :func:`resolve_timer`'s, with
    its source in ``timer_source``.
    """
    ident: dict[str, Any] = {
        "identity_version": IDENTITY_VERSION,
        "backend": backend_identity.get("backend"),
        "device_model": backend_identity.get("device_model"),
        "driver": backend_identity.get("driver"),
        "toolkit": backend_identity.get("toolkit"),
        "device_ids": backend_identity.get("device_ids"),
        "graph_capture_supported": backend_identity.get("graph_capture_supported"),
        "timer": backend_identity.get("timer"),
        "direct_repeat": direct_repeat,
        "rounds": rounds,
        "bench_level": None,
        "shape_mode": None,
        "tuner_cache": None,
        "autotune_mode": None,
        "pins": dict(sorted(pins.items())),
        "framework": None,
        "python": sys.version.split()[0],
        "zlops_version": __version__,
        "host": platform.node(),
    }
    for key, value in (harness or {}).items():
        if key in ident and key not in ("identity_version", "zlops_version"):
            ident[key] = value
    ident["timer"], ident["timer_source"] = resolve_timer(
        harness=harness, configured=configured_timer, from_format=format_timer,
        backend_default=backend_identity.get("timer"))
    return ident


#: a run_identity.json larger than this is not read
IDENTITY_MAX_BYTES = 4 * 1024 * 1024


def write_identity(path: Path, identity: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(identity, indent=2, sort_keys=True, default=str), encoding="utf-8")
    os.replace(tmp, path)


def read_identity(path: Path) -> dict[str, Any] | None:
    """The identity a harness wrote; None when absent, unreadable or not a small regular JSON file
    (a FIFO there must not hang the shard: zlops.safefiles)."""
    from zlops.errors import ZlopsError
    from zlops.safefiles import read_untrusted

    try:
        data = json.loads(read_untrusted(path, root=path.parent, max_bytes=IDENTITY_MAX_BYTES,
                                         what="identity file"))
    except (OSError, ValueError, ZlopsError):
        return None
    return data if isinstance(data, dict) else None


def differing_axes(a: Mapping[str, Any], b: Mapping[str, Any],
                   axes: Sequence[str] = CALIBER_AXES) -> tuple[tuple[str, Any, Any], ...]:
    """``(axis, a's value, b's value)`` for each of ``axes`` on which two identities differ."""
    return tuple((axis, a.get(axis), b.get(axis)) for axis in axes if a.get(axis) != b.get(axis))


def missing_axes(identity: Mapping[str, Any], axes: Sequence[str] = CALIBER_AXES) -> tuple[str, ...]:
    """The caliber axes an identity does not record at all (a value of None is recorded)."""
    return tuple(axis for axis in axes if axis not in identity)


def check_caliber(base: Mapping[str, Any] | None, head: Mapping[str, Any] | None, *,
                  allow_mismatch: bool = False, base_label: str = "base", head_label: str = "head") -> CaliberReport:
    """Compare two identities axis by axis; see the module docstring for the rules."""
    missing = tuple(label for label, ident in ((base_label, base), (head_label, head)) if not ident)
    if missing:
        return CaliberReport((), True, (), (), allow_mismatch, missing)
    assert base is not None and head is not None
    mismatches = differing_axes(base, head)
    reasons: list[str] = []
    warnings: list[str] = []
    if base.get("autotune_mode") == "record" and head.get("autotune_mode") == "record":
        reasons.append("both sides record autotune: each tuned on its own, so the delta is the tuner's; "
                       "replay one side from the other's record")
    for label, ident in ((base_label, base), (head_label, head)):
        if ident.get("autotune_mode") == "record" and ident.get("tuner_cache") == "shared":
            warnings.append(f"{label} records autotune on a shared tuner cache: relative conclusions hold, "
                            "absolute latencies depend on what else ran on the machine")
    moved = bool(base.get("device_ids") and head.get("device_ids") and base["device_ids"] != head["device_ids"])
    if moved:
        warnings.append(device_moved(base["device_ids"], head["device_ids"], base_label, head_label))
    refused = bool(mismatches or reasons)
    return CaliberReport(mismatches, refused, tuple(reasons), tuple(warnings), allow_mismatch, devices_moved=moved)


def short_device_ids(ids: Sequence[str]) -> str:
    """``GPU-dbaa8812, GPU-5e0c91aa``: each recorded device id without its kind, to 12 characters."""
    return ", ".join(str(i).split(":", 1)[-1][:12] for i in ids)


def device_moved(base_ids: Sequence[str], head_ids: Sequence[str], base_label: str = "base",
                 head_label: str = "head") -> str:
    """The warning for two runs on other physical devices of the same model: not a refusal (a pool's GPU gets
    replaced), but the deltas include the two devices' own difference."""
    return (f"other devices: {base_label} ran on {short_device_ids(base_ids)}, {head_label} on "
            f"{short_device_ids(head_ids)}; the delta includes the two devices' own difference, so a small change "
            "is only measured by an A/B on tonight's device")
