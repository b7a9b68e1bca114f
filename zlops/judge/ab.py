"""``zlops ab A_DIR B_DIR``: compare two sets of shard bundles, caliber first, then case by case.

Order matters and is the point of this module:

1. **Caliber, before a single latency.** Every shard's ``run_identity.json`` is read; the shards of
   one side must agree among themselves, and the two sides are compared by
   :func:`zlops.identity.check_caliber` (a differing axis, a missing identity, or both sides
   recording autotune refuses; recording on a shared tuner cache warns). A refusal raises
   :class:`AbRefused` (CLI exit 4) before any results file is opened, unless
   ``allow_caliber_mismatch``, which still carries every line found.
2. **Pairing.** Rows are paired by case key and metric (FlagGems-style keys already encode op,
   dtype and shape detail); a side's shards are pooled (samples concatenated). Only pairs that
   succeeded on both sides with a positive median count, and what did not pair is counted by
   reason, so an incomplete pairing cannot look like a complete range.
3. **Fallback.** A pair where either side's params carry ``fallback`` (zlops.timing's direct-timer
   fallback marker) or the two sides name different ``timer`` values was timed under another
   regime: its row says so, and so does the summary range line.
4. **Fingerprints.** With ``fingerprint_globs`` (e.g. ``**/*.ttgir``), each side's matching build
   artifacts are hashed (relative path + content, so a changed *set* of files counts too). Files
   map to cases like this: when a side's bundles hold a ``cases/`` folder (the per-case layout), a
   case's fingerprint covers the matching files under ``cases/<case_slug(case)>/`` only (none there:
   no artifacts for that case); otherwise the whole-bundle fingerprint (matching files anywhere
   under the bundle) applies to every case. Byte-identical fingerprints
   on both sides mean the switch changed no generated code for the case: it is skipped as
   ``SWITCH_NO_IR_DIFF`` (its rounds would measure noise and report "no difference") unless
   ``allow_no_ir_diff``. A side without any matching file is never called identical.

Each counted pair gets the medians, the change in percent, the simple judge's verdict at 2%/5%
(:func:`zlops.judge.judges.simple_judge`) and, with at least 2 samples a side, a Mann-Whitney p and a
bootstrap CI of the median ratio (:mod:`zlops.stats.twosample`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zlops import metrics
from zlops.errors import CaliberMismatch, ZlopsError
from zlops.identity import IDENTITY_FILE, CaliberReport, check_caliber, differing_axes, read_identity
from zlops.judge.judges import simple_judge
from zlops.model import CaseResult, Judgement, ShardStatus, Thresholds, Verdict, median_of
from zlops.run.bundle import find_bundles, read_json_object, read_results
from zlops.run.runner import MANIFEST
from zlops.stats.twosample import bootstrap_median_ratio_ci, mann_whitney

NO_IR_DIFF = "SWITCH_NO_IR_DIFF"
#: per-case build artifacts live in ``<bundle>/cases/<case_slug(case)>/`` (see the module docstring)
CASE_ARTIFACTS = "cases"
Key = tuple[str, str]  # (case, metric)


class AbRefused(CaliberMismatch):
    """The two sides were measured on different calibers; ``caliber`` holds every line found."""

    def __init__(self, caliber: CaliberReport) -> None:
        super().__init__("\n".join(caliber.lines()))
        self.caliber = caliber


def case_slug(case: str) -> str:
    """The folder name of a case's build artifacts: every character outside ``[A-Za-z0-9._=+-]`` is ``_``
    (``abs/float16/(64x64)`` -> ``abs_float16__64x64_``)."""
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", case)


def artifact_hashes(root: Path, globs: Sequence[str]) -> dict[str, str]:
    """``relative posix path -> sha256 of content`` for the files under ``root`` matching any glob."""
    out: dict[str, str] = {}
    for pattern in globs:
        for path in root.glob(pattern):
            if path.is_file():
                out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def fingerprint(entries: Iterable[tuple[str, str]]) -> str | None:
    """One digest over ``(relative path, content hash)`` entries; None when there are none."""
    items = sorted(set(entries))
    if not items:
        return None
    h = hashlib.sha256()
    for rel, digest in items:
        h.update(f"{rel}\0{digest}\n".encode())
    return h.hexdigest()


@dataclass(frozen=True)
class AbPair:
    """One case + metric measured on both sides."""

    case: str
    metric: str
    unit: str
    lower_is_better: bool
    base: tuple[float, ...]
    head: tuple[float, ...]
    judgement: Judgement
    p_value: float | None = None
    ratio_ci: tuple[float, float] | None = None
    fallback: bool = False
    notes: tuple[str, ...] = ()

    @property
    def base_median(self) -> float:
        return median_of(self.base)

    @property
    def head_median(self) -> float:
        return median_of(self.head)

    @property
    def change_pct(self) -> float:
        assert self.judgement.change_pct is not None
        return self.judgement.change_pct

    @property
    def verdict(self) -> Verdict:
        return self.judgement.verdict

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "metric": self.metric, "unit": self.unit, "lower_is_better": self.lower_is_better,
                "base_median": self.base_median, "head_median": self.head_median, "change_pct": self.change_pct,
                "verdict": self.verdict.value, "p_value": self.p_value,
                "ratio_ci": list(self.ratio_ci) if self.ratio_ci else None, "n_base": len(self.base),
                "n_head": len(self.head), "fallback": self.fallback, "notes": list(self.notes)}


@dataclass(frozen=True)
class AbReport:
    """The A/B: its caliber check, the counted pairs and everything that was not counted, by reason."""

    a_dirs: tuple[Path, ...]
    b_dirs: tuple[Path, ...]
    caliber: CaliberReport
    pairs: tuple[AbPair, ...] = ()
    no_ir_diff: tuple[Key, ...] = ()          # skipped as SWITCH_NO_IR_DIFF
    only_a: tuple[Key, ...] = ()
    only_b: tuple[Key, ...] = ()
    not_counted: tuple[tuple[Key, str], ...] = ()   # on both sides but not comparable (non-positive, units)
    shard_notes: tuple[str, ...] = ()
    fingerprint_globs: tuple[str, ...] = field(default=())

    @property
    def fallback_pairs(self) -> int:
        return sum(p.fallback for p in self.pairs)

    @property
    def improved(self) -> int:
        return sum(p.verdict is Verdict.IMPROVED for p in self.pairs)

    @property
    def regressed(self) -> int:
        return sum(p.verdict in (Verdict.POTENTIAL, Verdict.REGRESSION) for p in self.pairs)

    def range_line(self) -> str:
        if not self.pairs:
            return "range: no pair succeeded on both sides with a positive value"
        changes = [p.change_pct for p in self.pairs]
        line = f"range {min(changes):+.1f}%..{max(changes):+.1f}% over {len(self.pairs)} pairs"
        if self.fallback_pairs:
            n = self.fallback_pairs
            line += f" ({n} pair{'s' if n != 1 else ''} include{'s' if n == 1 else ''} a direct-timer fallback)"
        return line

    def overall_line(self) -> str:
        return f"Overall: {self.improved} of {len(self.pairs)} cases improved, {self.regressed} regressed"

    def to_json(self) -> dict[str, Any]:
        return {
            "a": [str(p) for p in self.a_dirs], "b": [str(p) for p in self.b_dirs],
            "caliber": caliber_json(self.caliber), "pairs": [p.to_json() for p in self.pairs],
            "no_ir_diff": [list(k) for k in self.no_ir_diff], "only_a": [list(k) for k in self.only_a],
            "only_b": [list(k) for k in self.only_b],
            "not_counted": [{"case": k[0], "metric": k[1], "why": why} for k, why in self.not_counted],
            "shard_notes": list(self.shard_notes), "fingerprint_globs": list(self.fingerprint_globs),
            "range": self.range_line(), "overall": self.overall_line(),
            "improved": self.improved, "regressed": self.regressed, "fallback_pairs": self.fallback_pairs,
        }


def caliber_json(c: CaliberReport) -> dict[str, Any]:
    return {"refused": c.refused, "allowed": c.allowed, "missing": list(c.missing),
            "mismatches": [{"axis": a, "a": x, "b": y} for a, x, y in c.mismatches], "reasons": list(c.reasons),
            "warnings": list(c.warnings), "lines": c.lines()}


# --- 1. caliber -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Side:
    label: str
    bundles: tuple[tuple[str, Path], ...]   # (shard label, bundle dir)


def _side(label: str, dirs: Sequence[Path]) -> _Side:
    shards: list[tuple[str, Path]] = []
    for d in dirs:
        for b in find_bundles(Path(d)):
            rel = b.relative_to(d).as_posix() if b != Path(d) else ""
            name = f"{label}:{rel}" if rel else (label if len(dirs) == 1 else f"{label}:{d}")
            shards.append((name, b))
    return _Side(label, tuple(shards))


def side_caliber(a_dirs: Sequence[Path], b_dirs: Sequence[Path], *,
                 allow_caliber_mismatch: bool = False) -> CaliberReport:
    """The caliber check of an A/B, reading only the identities (no results file is opened)."""
    return _caliber(_side("A", a_dirs), _side("B", b_dirs), allow_caliber_mismatch)


def _caliber(a: _Side, b: _Side, allow: bool) -> CaliberReport:
    missing: list[str] = []
    reasons: list[str] = []
    reps: list[dict[str, Any] | None] = []
    for side in (a, b):
        idents = [(name, read_identity(path / IDENTITY_FILE)) for name, path in side.bundles]
        missing += [f"{name} ({path / IDENTITY_FILE})" for (name, ident), (_, path) in zip(idents, side.bundles,
                                                                                            strict=True)
                    if ident is None]
        present = [(name, ident) for name, ident in idents if ident is not None]
        if not present:
            reps.append(None)
            continue
        first_name, first = present[0]
        for name, ident in present[1:]:
            reasons += [f"{side.label} shards disagree on {axis}: {x!r} ({first_name}) != {y!r} ({name})"
                        for axis, x, y in differing_axes(first, ident)]
        rep = dict(first)
        if any(ident.get("autotune_mode") == "record" for _, ident in present):
            rep["autotune_mode"] = "record"
        reps.append(rep)
    cross = check_caliber(reps[0], reps[1], allow_mismatch=allow, base_label="A", head_label="B")
    mismatches = cross.mismatches if not cross.missing else ()
    reasons += cross.reasons
    refused = bool(missing or mismatches or reasons)
    return CaliberReport(mismatches, refused, tuple(reasons), cross.warnings, allow, tuple(missing))


# --- 2. results, pooled per side --------------------------------------------------------------------

@dataclass
class _Pooled:
    first: CaseResult
    samples: list[float]
    fallbacks: list[str]
    timers: set[Any]


def _load(side: _Side, notes: list[str]) -> dict[Key, _Pooled]:
    pooled: dict[Key, _Pooled] = {}
    for name, path in side.bundles:
        manifest, why = read_json_object(path / MANIFEST)
        if manifest is None:
            raise ZlopsError(f"{name}: {path}: {why}")
        status = manifest.get("status")
        if status != ShardStatus.OK.value:
            notes.append(f"{name}: shard {status}, no rows ({manifest.get('error') or 'no error recorded'})")
            continue
        report = read_results(path, manifest)  # ParseError names the file and line
        if report.dropped:
            kinds = ", ".join(f"{k} {n}" for k, n in report.counts().items())
            notes.append(f"{name}: the parser dropped {len(report.dropped)} item(s) ({kinds})")
        if report.measured_nothing:
            notes.append(f"{name}: status ok but its results hold no case (measured nothing)")
        for r in report.results:
            p = pooled.get(r.key)
            if p is None:
                p = pooled[r.key] = _Pooled(r, [], [], set())
            p.samples += [v if r.unit == p.first.unit else metrics.convert(v, r.unit, p.first.unit)
                          for v in r.samples]
            if r.params.get("fallback"):
                p.fallbacks.append(str(r.params["fallback"]))
            p.timers.add(r.params.get("timer"))
    if not pooled:
        raise ZlopsError(f"side {side.label} measured nothing: no shard of "
                         f"{', '.join(str(p) for _, p in side.bundles)} holds a case result; a run that measured "
                         "nothing is a failure")
    return pooled


# --- 4. fingerprints --------------------------------------------------------------------------------

class _Fingerprints:
    def __init__(self, side: _Side, globs: Sequence[str]) -> None:
        self.side, self.globs = side, tuple(globs)
        self._whole: str | None = None
        self._whole_done = False

    def of(self, case: str) -> str | None:
        per_case = [p / CASE_ARTIFACTS for _, p in self.side.bundles if (p / CASE_ARTIFACTS).is_dir()]
        if per_case:  # the per-case layout: a case without its folder has no artifacts
            return fingerprint(e for root in per_case if (root / case_slug(case)).is_dir()
                               for e in artifact_hashes(root / case_slug(case), self.globs).items())
        if not self._whole_done:
            self._whole = fingerprint(e for _, p in self.side.bundles for e in artifact_hashes(p, self.globs).items())
            self._whole_done = True
        return self._whole


# --- the comparison ---------------------------------------------------------------------------------

def compare_bundles(a_dirs: Sequence[Path], b_dirs: Sequence[Path], *, allow_caliber_mismatch: bool = False,
                    allow_no_ir_diff: bool = False, fingerprint_globs: Sequence[str] = (),
                    metric: str | None = None, thresholds: Thresholds | None = None) -> AbReport:
    """A/B of two sets of shard bundles (A = base, B = head); see the module docstring.

    ``a_dirs``/``b_dirs`` are bundle dirs or run dirs (``<pool>/<device>/`` bundles). Raises
    :class:`AbRefused` on a caliber refusal that is not allowed (before any results file is read),
    :class:`zlops.errors.ParseError` for a garbled results file, :class:`ZlopsError` when a side
    measured nothing. ``metric`` keeps only that metric's rows.
    """
    a, b = _side("A", a_dirs), _side("B", b_dirs)
    caliber = _caliber(a, b, allow_caliber_mismatch)
    if caliber.refused and not caliber.allowed:
        raise AbRefused(caliber)
    notes: list[str] = []
    rows_a, rows_b = _load(a, notes), _load(b, notes)
    if metric is not None:
        rows_a = {k: v for k, v in rows_a.items() if k[1] == metric}
        rows_b = {k: v for k, v in rows_b.items() if k[1] == metric}
    fp_a, fp_b = _Fingerprints(a, fingerprint_globs), _Fingerprints(b, fingerprint_globs)
    th = thresholds or Thresholds()
    pairs: list[AbPair] = []
    no_ir: list[Key] = []
    not_counted: list[tuple[Key, str]] = []
    for key in sorted(rows_a.keys() & rows_b.keys()):
        pa, pb = rows_a[key], rows_b[key]
        try:
            head = [v if pb.first.unit == pa.first.unit else metrics.convert(v, pb.first.unit, pa.first.unit)
                    for v in pb.samples]
        except ValueError as exc:
            not_counted.append((key, f"units differ: {exc}"))
            continue
        base = pa.samples
        ma, mb = median_of(base), median_of(head)
        if not (ma > 0 and mb > 0):
            not_counted.append((key, f"non-positive median (A {ma:g}, B {mb:g})"))
            continue
        pair_notes: list[str] = []
        if fingerprint_globs:
            fa, fb = fp_a.of(key[0]), fp_b.of(key[0])
            if fa is not None and fa == fb:
                if not allow_no_ir_diff:
                    no_ir.append(key)
                    continue
                pair_notes.append(f"{NO_IR_DIFF} (allowed)")
            elif fa is None or fb is None:
                pair_notes.append("no build artifacts on " + " and ".join(s for s, f in (("A", fa), ("B", fb))
                                                                           if f is None))
        pairs.append(_pair(key, pa, pb, base, head, th, pair_notes))
    return AbReport(
        a_dirs=tuple(Path(d) for d in a_dirs), b_dirs=tuple(Path(d) for d in b_dirs), caliber=caliber,
        pairs=tuple(pairs), no_ir_diff=tuple(no_ir), only_a=tuple(sorted(rows_a.keys() - rows_b.keys())),
        only_b=tuple(sorted(rows_b.keys() - rows_a.keys())), not_counted=tuple(not_counted),
        shard_notes=tuple(notes), fingerprint_globs=tuple(fingerprint_globs))


def _pair(key: Key, pa: _Pooled, pb: _Pooled, base: list[float], head: list[float], th: Thresholds,
          notes: list[str]) -> AbPair:
    first = pa.first
    judgement = simple_judge(base, head, first.lower_is_better, th)
    p_value = ci = None
    if len(base) >= 2 and len(head) >= 2:
        p_value = mann_whitney(base, head)
        if min(base) > 0 and min(head) > 0:
            ci = bootstrap_median_ratio_ci(base, head)
    else:
        notes.append("n<2 on a side: no test")
    fallback = False
    for label, pooled in (("A", pa), ("B", pb)):
        if pooled.fallbacks:
            fallback = True
            notes.append(f"{label} fell back to the direct timer: {pooled.fallbacks[0]}")
    if pa.timers != pb.timers:
        fallback = True
        notes.append(f"timer {_timers(pa.timers)} vs {_timers(pb.timers)}")
    return AbPair(case=key[0], metric=key[1], unit=first.unit, lower_is_better=first.lower_is_better,
                  base=tuple(base), head=tuple(head), judgement=judgement, p_value=p_value, ratio_ci=ci,
                  fallback=fallback, notes=tuple(notes))


def _timers(timers: set[Any]) -> str:
    return "/".join(sorted(str(t) if t is not None else "?" for t in timers))


# --- rendering --------------------------------------------------------------------------------------

COLUMNS = ("Case", "Base", "HEAD", "Delta", "Change %", "Verdict", "Notes")
_LEFT = {0, 5, 6}


def render_ab(report: AbReport) -> str:
    """The A/B as plain text in the compare table's style, ending with the range and Overall lines."""
    from zlops.report.cells import fmt_change, fmt_delta, fmt_value, marker

    def side(dirs: Sequence[Path]) -> str:
        return ", ".join(str(d) for d in dirs)

    lines = [f"A/B: A = {side(report.a_dirs)}  vs  B = {side(report.b_dirs)}", *report.caliber.lines(), ""]
    multi = len({p.metric for p in report.pairs}) > 1
    rows: list[Sequence[str]] = [COLUMNS]
    for p in report.pairs:
        extra = [f"p={p.p_value:.3g}"] if p.p_value is not None else []
        if p.ratio_ci is not None:
            extra.append(f"ratio CI [{p.ratio_ci[0]:.3f}, {p.ratio_ci[1]:.3f}]")
        rows.append((f"{p.case} ({p.metric})" if multi else p.case, fmt_value(p.base_median, p.unit),
                     fmt_value(p.head_median, p.unit), fmt_delta(p.head_median - p.base_median, p.unit,
                                                                 scale=p.base_median),
                     fmt_change(p.change_pct), marker(p.verdict), "; ".join([*extra, *p.notes])))
    if len(rows) > 1:
        widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]

        def fmt(row: Sequence[str]) -> str:
            return "  ".join(c.ljust(widths[i]) if i in _LEFT else c.rjust(widths[i])
                             for i, c in enumerate(row)).rstrip()

        lines += [fmt(rows[0]), "  ".join("-" * w for w in widths), *(fmt(r) for r in rows[1:])]
    else:
        lines.append("(no pair counted)")
    lines.append("")
    if report.no_ir_diff:
        lines.append(f"{NO_IR_DIFF}: {len(report.no_ir_diff)} skipped, byte-identical "
                     f"{' '.join(report.fingerprint_globs)} on both sides (SWITCH_ALLOW_NO_IR_DIFF=1 or "
                     f"--allow-no-ir-diff measures them): " + ", ".join(_name(k) for k in report.no_ir_diff))
    uncounted = [f"{len(report.only_a)} only in A"] if report.only_a else []
    uncounted += [f"{len(report.only_b)} only in B"] if report.only_b else []
    uncounted += [f"{len(report.not_counted)} not comparable"] if report.not_counted else []
    if uncounted:
        lines.append("Not counted: " + ", ".join(uncounted))
        lines += [f"  only in A: {_name(k)}" for k in report.only_a]
        lines += [f"  only in B: {_name(k)}" for k in report.only_b]
        lines += [f"  {_name(k)}: {why}" for k, why in report.not_counted]
    lines += list(report.shard_notes)
    lines += [report.range_line(), report.overall_line()]
    return "\n".join(lines) + "\n"


def _name(key: Key) -> str:
    return f"{key[0]} ({key[1]})"
