"""Is it the kernel or the environment? What changed for one alert's op, from two kernel inventories.

:func:`attribute` compares the baseline night's and tonight's inventories (:mod:`.inventory`) of the
kernels that belong to the alert's op and says exactly one of:

- ``kernel code changed: <kernel> (compiled code a1b2c3d4.. -> c3d4e5f6.., num_warps 4 -> 8)``: a
  kernel of the op was compiled to different code (or appeared, or is gone);
- ``same kernel code, different variants compiled: <kernel> (variants a1b2c3d4.. not compiled tonight)``:
  no variant's code changed, but one night compiled variants (specialisations, autotune configs) the other
  did not (FlagGems' libtuner re-tuning ``max_kernel`` on one night of a README-only commit compiled two more);
- ``same compiled kernels, different autotune choice: ...``: every kernel of the op compiled to the
  same code both nights, but the autotuner's cached pick for a tuning key differs;
- ``no compiled kernel of this op changed: the change is outside the kernels (launch path, Python,
  environment)``;
- ``no inventory: ...`` when either night has none, or no kernel of either night belongs to the op.

and, beside it, the run-identity differences (driver, toolkit, framework, Triton version, clocks) the
shards recorded. :attr:`Attribution.text` is the one rendering every surface prints (``zlops alert
show``, the alert's Slack thread, the inbox, the series page). Pure: values in, a value out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zlops.identity import short_device_ids
from zlops.kernels.inventory import Inventory, KernelRecord

KERNEL_CHANGED = "kernel_changed"
VARIANTS_CHANGED = "variants_changed"
AUTOTUNE_CHANGED = "autotune_changed"
OUTSIDE = "outside_kernels"
NO_INVENTORY = "no_inventory"
#: kernels named in one line; the rest are counted
MAX_NAMED = 3
#: identity axes compared between the two nights (the caliber's, zlops.identity, that describe the stack)
IDENTITY_AXES = ("device_model", "device_ids", "driver", "toolkit", "framework", "torch", "triton", "python", "pins")
#: a median SM clock that moved by more than this share is named
CLOCK_SHARE = 0.03


@dataclass(frozen=True)
class Attribution:
    """What changed for an alert's op: ``kind``, the headline sentence, and the identity differences."""

    kind: str
    headline: str
    identity: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The one line every surface prints."""
        if not self.identity:
            return self.headline
        return f"{self.headline}; run identity differs: {', '.join(self.identity)}"


def kernel_matcher(op: str, mapping: Mapping[str, str] | None = None) -> Callable[[str], bool]:
    """Which kernel names belong to op family ``op``: the first ``mapping`` entry whose op regex matches
    ``op`` whole gives the kernel regex (searched in the name); without one, a name that holds ``op`` as a
    word (case-insensitive, not inside a longer run of letters and digits: ``max`` owns ``max_kernel_1`` but not
    ``argmax_kernel_non_inner``, ``sum`` not ``cumsum_kernel``) belongs to it."""
    for op_re, kernel_re in (mapping or {}).items():
        if re.fullmatch(op_re, op):
            pattern = re.compile(kernel_re)
            return lambda name: pattern.search(name) is not None
    word = re.compile(rf"(?<![a-z0-9]){re.escape(op.lower())}(?![a-z0-9])")
    return lambda name: word.search(name.lower()) is not None


def _short(h: str | None) -> str:
    return f"{h[:8]}.." if h else "(no binary)"


def _fmt(v: Any) -> str:
    return "-" if v is None else str(v)


def _launch_diff(a: KernelRecord, b: KernelRecord) -> list[str]:
    la, lb = a.launch, b.launch
    return [f"{k} {_fmt(la.get(k))} -> {_fmt(lb.get(k))}" for k in dict.fromkeys([*la, *lb]) if la.get(k) != lb.get(k)]


def _variant_key(k: KernelRecord) -> tuple[str, str]:
    return (str(sorted(k.launch.items(), key=lambda kv: kv[0])), k.code_hash or "")


def _changes(name: str, base: Sequence[KernelRecord], head: Sequence[KernelRecord]) -> tuple[bool, str] | None:
    """``(code_changed, "name (...)")`` when the kernel's compiled variants differ, else None. Its code changed
    when tonight compiled a variant the base did not while a base variant is gone (the pairs are named
    ``compiled code a.. -> b..``), or the kernel appeared or is gone; a one-sided difference (variants only one
    night compiled, the rest identical) is a different set of variants of the same code."""
    old = {k.code_hash for k in base}
    new = {k.code_hash for k in head}
    if old == new:
        return None
    gone = sorted((k for k in base if k.code_hash not in new), key=_variant_key)
    came = sorted((k for k in head if k.code_hash not in old), key=_variant_key)
    if not base:
        return True, f"{name} (new kernel, compiled code {', '.join(_short(b.code_hash) for b in came)})"
    if not head:
        return True, f"{name} (no longer compiled)"
    if not gone or not came:
        which = ", ".join(_short(k.code_hash) for k in (gone or came))
        where = "not compiled tonight" if gone else "compiled only tonight"
        return False, f"{name} (variant{'s' if len(gone or came) > 1 else ''} {which} {where}; " \
                      f"{len(old & new)} identical)"
    parts = []
    for a, b in zip(gone, came, strict=False):
        parts.append(", ".join([f"compiled code {_short(a.code_hash)} -> {_short(b.code_hash)}", *_launch_diff(a, b)]))
    parts += [f"new variant {_short(b.code_hash)}" for b in came[len(gone):]]
    parts += [f"variant {_short(a.code_hash)} gone" for a in gone[len(came):]]
    return True, f"{name} ({'; '.join(parts)})"


def _named(items: Sequence[str]) -> str:
    more = f"; and {len(items) - MAX_NAMED} more" if len(items) > MAX_NAMED else ""
    return "; ".join(items[:MAX_NAMED]) + more


def attribute(base: Inventory | None, head: Inventory | None, op: str, *,
              mapping: Mapping[str, str] | None = None, identity: Sequence[str] = ()) -> Attribution:
    """Compare the baseline's (``base``) and tonight's (``head``) inventories for op family ``op``."""
    ident = tuple(identity)
    for side, inv in (("the baseline night", base), ("tonight", head)):
        if inv is None:
            return Attribution(NO_INVENTORY, f"no inventory: {side} recorded no kernel inventory", ident)
        if not inv.usable:
            return Attribution(NO_INVENTORY, f"no inventory: {side}: {inv.reason}", ident)
    assert base is not None and head is not None
    belongs = kernel_matcher(op, mapping)
    b = [k for k in base.kernels if belongs(k.name)]
    h = [k for k in head.kernels if belongs(k.name)]
    if not b and not h:
        dropped = " (some kernels were dropped over the cap)" if base.dropped or head.dropped else ""
        return Attribution(NO_INVENTORY, f"no inventory: none of the {len(base.kernels)} / {len(head.kernels)} "
                                         f"compiled kernels of the two nights belongs to op {op!r}{dropped} "
                                         "(map its kernels with kernels.map)", ident)
    names = sorted({k.name for k in (*b, *h)})
    diffs = [c for n in names
             if (c := _changes(n, [k for k in b if k.name == n], [k for k in h if k.name == n])) is not None]
    if changed := [text for code, text in diffs if code]:
        return Attribution(KERNEL_CHANGED, f"kernel code changed: {_named(changed)}", ident)
    if variants := [text for _, text in diffs]:
        return Attribution(VARIANTS_CHANGED, "same kernel code, different variants compiled (specialisations or "
                                             f"autotune configs): {_named(variants)}", ident)
    base_picks = {(p.kernel, p.key): p.config for p in base.autotune if belongs(p.kernel)}
    head_picks = {(p.kernel, p.key): p.config for p in head.autotune if belongs(p.kernel)}
    picks = []
    for (kernel, key) in sorted(base_picks.keys() & head_picks.keys()):
        a, c = base_picks[(kernel, key)], head_picks[(kernel, key)]
        if a != c:
            diff = ", ".join(f"{k} {_fmt(a.get(k))} -> {_fmt(c.get(k))}" for k in dict.fromkeys([*a, *c])
                             if a.get(k) != c.get(k))
            picks.append(f"{kernel} at key {key}: {diff}")
    if picks:
        return Attribution(AUTOTUNE_CHANGED, f"same compiled kernels, different autotune choice: {_named(picks)}",
                           ident)
    return Attribution(OUTSIDE, f"no compiled kernel of this op changed ({len(names)} kernel(s): "
                                f"{', '.join(names[:MAX_NAMED])}{' ...' if len(names) > MAX_NAMED else ''}): "
                                "the change is outside the kernels (launch path, Python, environment)", ident)


def identity_changes(base: Mapping[str, Any] | None, head: Mapping[str, Any] | None, *,
                     base_inv: Inventory | None = None, head_inv: Inventory | None = None,
                     base_telemetry: Mapping[str, Any] | None = None,
                     head_telemetry: Mapping[str, Any] | None = None) -> list[str]:
    """``driver 550.54 -> 560.28``, ``triton 3.5.0 -> 3.6.0``, ``SM clock median 1980 -> 1755 MHz``:
    what differs between the two nights' recorded identities (only what both recorded)."""
    out: list[str] = []
    base, head = base or {}, head or {}
    for axis in IDENTITY_AXES:
        a, b = base.get(axis), head.get(axis)
        if a is None or b is None or a == b:
            continue
        if axis == "device_ids":                               # the physical devices: ids, shortened
            out.append(f"device {short_device_ids(a)} -> {short_device_ids(b)}")
        elif isinstance(a, Mapping) and isinstance(b, Mapping):  # framework {torch, triton}, pins {file: rev}
            prefix = "pin " if axis == "pins" else ""
            out += [f"{prefix}{k} {a[k]} -> {b[k]}" for k in sorted(a.keys() & b.keys()) if a[k] != b[k]]
        else:
            out.append(f"{axis} {a} -> {b}")
    versions = [sorted({k.compiler_version for k in inv.kernels if k.compiler_version}) if inv is not None else []
                for inv in (base_inv, head_inv)]
    said = any(line.startswith("triton ") for line in out)
    if all(versions) and versions[0] != versions[1] and not said:
        out.append(f"triton {','.join(versions[0])} -> {','.join(versions[1])}")
    ca = (base_telemetry or {}).get("sm_clock_median_mhz")
    cb = (head_telemetry or {}).get("sm_clock_median_mhz")
    if isinstance(ca, (int, float)) and isinstance(cb, (int, float)) and ca > 0 and abs(cb - ca) / ca > CLOCK_SHARE:
        out.append(f"SM clock median {ca:.0f} -> {cb:.0f} MHz")
    return out


def same_op_kernels(a: Inventory | None, b: Inventory | None, ops: Sequence[str], *,
                    mapping: Mapping[str, str] | None = None) -> bool | None:
    """Whether two commits compiled the same kernels for ``ops`` (same names, compiled code and launch
    choices); None when either has no usable inventory or no kernel of either belongs to the ops."""
    if a is None or b is None or not a.usable or not b.usable:
        return None
    matchers = [kernel_matcher(op, mapping) for op in ops]

    def of(inv: Inventory) -> set[tuple[str, str | None, str]]:
        return {(k.name, k.code_hash, str(sorted(k.launch.items()))) for k in inv.kernels
                if any(m(k.name) for m in matchers)}

    sa, sb = of(a), of(b)
    if not sa and not sb:
        return None
    return sa == sb


def kernel_side(good: Inventory | None, bad: Inventory | None, inv: Inventory | None, ops: Sequence[str], *,
                mapping: Mapping[str, str] | None = None) -> str | None:
    """``good`` / ``bad`` when ``inv``'s kernels for ``ops`` are exactly one end's of a range whose two
    ends' kernels differ (the regression came with a kernel change); None: cannot tell, measure it."""
    if same_op_kernels(good, bad, ops, mapping=mapping) is not False:
        return None
    if same_op_kernels(good, inv, ops, mapping=mapping):
        return "good"
    if same_op_kernels(bad, inv, ops, mapping=mapping):
        return "bad"
    return None
