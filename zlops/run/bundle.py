"""A shard's artifact bundle: what it must hold, and the check ``zlops bundle verify DIR`` runs on it.

A bundle is one shard's artifact folder as :func:`zlops.run.runner.run_shard` leaves it, versioned by
``manifest.json``'s ``bundle_version`` (this zlops writes and reads version 1):

- ``manifest.json``: argv, commit, pool/device/backend, ``status``, ``format``, ``results_file``, times;
- ``run.log``: the benchmark's stdout+stderr (absent only when the shard never started: skipped);
- the results file (``manifest["results_file"]``, parsed with ``manifest["format"]``) when ``status`` is ok;
- ``run_identity.json``: the caliber (:mod:`zlops.identity`), every caliber axis present;
- ``telemetry.csv``, or ``telemetry.err`` saying why there is none (absent only when skipped);
- ``timing.json``: status, start/end, duration, exit code, agreeing with the manifest;
- ``kernels.json`` (only a suite with ``kernels:``): the shard's kernel inventory (zlops.kernels), readable.

A run folder holds one bundle per shard at ``<pool>/<device>/``; :func:`find_bundles` accepts either.
:func:`verify_bundle` never raises for a bad bundle: every defect is a ``problem`` (the bundle cannot
be trusted) or a ``warning`` (it can, with the caveat said). A shard with status ok whose results
hold no case is a problem: a run that measured nothing is a failure, never an empty success.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from zlops.errors import ParseError, ZlopsError
from zlops.formats import format_names, parse_results_with_report
from zlops.formats._report import ParseReport
from zlops.host.telemetry import CSV_NAME, ERR_NAME
from zlops.identity import IDENTITY_FILE, IDENTITY_VERSION, differing_axes, missing_axes, read_identity
from zlops.model import ShardStatus
from zlops.run.runner import BUNDLE_VERSION, MANIFEST, RUN_LOG, TIMING_FILE

#: bundle versions this zlops reads. Only 1 exists; a later version adds an upgrade step here
#: (version N -> N+1, never editing an old one), as zlops-json does for its schema.
READABLE_BUNDLE_VERSIONS: tuple[int, ...] = (BUNDLE_VERSION,)
TIMING_VERSION = 1
#: statuses of a shard that never finished: the runner (or its host) died mid-shard
_UNFINISHED = ("waiting", "running")


@dataclass(frozen=True)
class BundleReport:
    """What :func:`verify_bundle` found in one bundle."""

    path: Path
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    status: str | None = None        # the manifest's shard status, when readable
    cases: int | None = None         # case results parsed from the results file, when parsed
    dropped: int | None = None       # items of the results file the adapter left out, when parsed

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "ok": self.ok, "status": self.status, "cases": self.cases,
                "dropped": self.dropped, "problems": list(self.problems), "warnings": list(self.warnings)}

    def lines(self) -> list[str]:
        """Plain text: a header line, then one line per problem and per warning."""
        what = [f"status {self.status}"] if self.status else []
        if self.cases is not None:
            what.append(f"{self.cases} case results" + (f", {self.dropped} dropped" if self.dropped else ""))
        head = f"{'ok' if self.ok else 'BAD'}  {self.path}" + (f" ({'; '.join(what)})" if what else "")
        return [head, *(f"  problem: {p}" for p in self.problems), *(f"  warning: {w}" for w in self.warnings)]


def find_bundles(path: Path) -> list[Path]:
    """``path`` itself when it is a bundle (holds manifest.json), else the bundles of a run folder at
    ``<pool>/<device>/``, sorted. Raises :class:`ZlopsError` when there is none."""
    if (path / MANIFEST).is_file():
        return [path]
    found = sorted(m.parent for m in path.glob(f"*/*/{MANIFEST}") if m.is_file())
    if not found:
        what = "does not exist" if not path.exists() else f"holds no {MANIFEST}, nor <pool>/<device>/{MANIFEST}"
        raise ZlopsError(f"{path}: no shard bundle: {what}")
    return found


def read_json_object(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``(object, None)``, or ``(None, why)`` for a missing, unreadable, garbled or non-object file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path.name} cannot be read: {exc}"
    except ValueError as exc:
        return None, f"{path.name} is not valid JSON (truncated or garbled?): {exc}"
    if not isinstance(data, dict):
        return None, f"{path.name}: expected a JSON object, got {type(data).__name__}"
    return data, None


def results_path(bundle: Path, manifest: dict[str, Any]) -> Path | None:
    """The bundle's results file. The manifest records the absolute path the shard wrote, always inside
    its artifact folder (``results_name`` is a plain file name), so a bundle that was copied elsewhere
    holds it under the same name; the recorded path itself is never read (a copy must stand alone)."""
    recorded = manifest.get("results_file")
    if not isinstance(recorded, str) or not recorded:
        return None
    return bundle / Path(recorded).name


def read_results(bundle: Path, manifest: dict[str, Any]) -> ParseReport:
    """Parse the bundle's results file with the manifest's format; :class:`ParseError` names the file.
    Read as ingest reads a shard's (zlops.formats: a regular file inside the bundle; a link out of it
    is refused, a copied bundle must stand alone)."""
    fmt = manifest.get("format")
    path = results_path(bundle, manifest)
    if not isinstance(fmt, str) or path is None:
        raise ParseError(f"{MANIFEST} names no results file and format", path=str(bundle / MANIFEST))
    return parse_results_with_report(fmt, path, root=bundle)


def verify_bundle(bundle: Path) -> BundleReport:
    """Check one shard bundle (see the module docstring for what it must hold)."""
    problems: list[str] = []
    warnings: list[str] = []
    if not bundle.is_dir():
        return BundleReport(bundle, (f"{bundle} is not a directory",))
    manifest, why = read_json_object(bundle / MANIFEST)
    if manifest is None:
        return BundleReport(bundle, (str(why),))
    version = manifest.get("bundle_version")
    if type(version) is not int:
        problems.append(f"{MANIFEST} has no integer bundle_version (got {version!r}): written by a zlops that "
                        "did not version bundles, or edited by hand")
    elif version > max(READABLE_BUNDLE_VERSIONS):
        # a newer layout may differ in anything: checking it as version 1 would only mislead
        newer = (f"bundle_version {version} is newer than this zlops reads "
                 f"({', '.join(map(str, READABLE_BUNDLE_VERSIONS))}); upgrade zlops")
        return BundleReport(bundle, (newer,))
    elif version not in READABLE_BUNDLE_VERSIONS:
        problems.append(f"bundle_version {version} is not a zlops bundle version "
                        f"(this zlops reads {', '.join(map(str, READABLE_BUNDLE_VERSIONS))})")

    status = manifest.get("status")
    known = {s.value for s in ShardStatus}
    if status in _UNFINISHED:
        problems.append(f"{MANIFEST} status is {status!r}: the shard never finished (runner or host died)")
    elif status not in known:
        problems.append(f"{MANIFEST} status {status!r} is not one of {', '.join(sorted(known))}")
    elif status != ShardStatus.OK.value:
        warnings.append(f"shard {status}: {manifest.get('error') or 'no error recorded'}")
    started = status not in (ShardStatus.SKIPPED.value, *_UNFINISHED)

    if started and not (bundle / RUN_LOG).is_file():
        problems.append(f"{RUN_LOG} is missing")
    if started and not ((bundle / CSV_NAME).is_file() or (bundle / ERR_NAME).is_file()):
        problems.append(f"neither {CSV_NAME} nor {ERR_NAME} is present (telemetry must say why it is absent)")
    if status == ShardStatus.OK.value and manifest.get("exit_code") not in (0, None):
        if manifest.get("exit_code") in (manifest.get("partial_exit_codes") or ()):
            warnings.append(manifest.get("error") or f"partial: exit code {manifest.get('exit_code')!r}")
        else:
            problems.append(f"status ok but exit_code {manifest.get('exit_code')!r}")

    cases = dropped = None
    if status == ShardStatus.OK.value:
        cases, dropped = _check_results(bundle, manifest, problems, warnings)
    _check_identity(bundle, manifest, problems)
    _check_timing(bundle, manifest, problems)
    _check_kernels(bundle, manifest, problems, warnings)
    return BundleReport(bundle, tuple(problems), tuple(warnings), status if isinstance(status, str) else None,
                        cases, dropped)


def _check_kernels(bundle: Path, manifest: dict[str, Any], problems: list[str], warnings: list[str]) -> None:
    """``kernels.json`` (zlops.kernels), when the shard recorded one: readable, and said in the manifest."""
    from zlops.kernels.inventory import INVENTORY_FILE, InventoryError, read_inventory

    try:
        inv = read_inventory(bundle)
    except InventoryError as exc:
        problems.append(str(exc).replace(str(bundle) + "/", ""))
        return
    if inv is None:
        if manifest.get("kernels"):
            problems.append(f"{MANIFEST} records kernels ({manifest['kernels']}) but {INVENTORY_FILE} is missing")
        return
    if not inv.usable:
        warnings.append(f"{INVENTORY_FILE}: {inv.summary()}")
    elif inv.dropped:
        warnings.append(f"{INVENTORY_FILE}: {inv.dropped} kernel(s) over the cap were dropped")


def _check_results(bundle: Path, manifest: dict[str, Any], problems: list[str],
                   warnings: list[str]) -> tuple[int | None, int | None]:
    fmt = manifest.get("format")
    if fmt not in format_names():
        problems.append(f"{MANIFEST} format {fmt!r} is not a known results format ({', '.join(format_names())})")
        return None, None
    path = results_path(bundle, manifest)
    if path is None:
        problems.append(f"{MANIFEST} has no results_file although status is ok")
        return None, None
    if not path.is_file():
        problems.append(f"results file {path.name} is missing although status is ok")
        return None, None
    try:
        report = read_results(bundle, manifest)
    except ParseError as exc:
        problems.append(f"results file does not parse as {fmt}: {exc}")
        return None, None
    if report.measured_nothing:
        problems.append(f"status ok but results file {path.name} holds no case result: a run that measured "
                        "nothing is a failure")
    if report.dropped:
        kinds = ", ".join(f"{k} {n}" for k, n in report.counts().items())
        warnings.append(f"partial results: the {fmt} parser dropped {len(report.dropped)} item(s) ({kinds})")
    return len(report.results), len(report.dropped)


def _check_identity(bundle: Path, manifest: dict[str, Any], problems: list[str]) -> None:
    """Both identities (the manifest's ``identity`` and run_identity.json) are present, complete
    (every caliber axis of :mod:`zlops.identity`), agree with each other, and agree with where the
    manifest says the shard ran: its backend, and its pool and device when the bundle sits in a run
    folder's ``<pool>/<device>/``. A bundle without a trustworthy identity can be compared with nothing.
    """
    recorded = _manifest_identity(manifest, problems)
    _check_placement(bundle, manifest, problems)
    path = bundle / IDENTITY_FILE
    if not path.is_file():
        problems.append(f"{IDENTITY_FILE} is missing: no comparison can use this shard")
        ident = None
    else:
        ident = read_identity(path)
        if ident is None:
            problems.append(f"{IDENTITY_FILE} is not a JSON object (truncated or garbled?)")
    if ident is not None:
        version = ident.get("identity_version")
        if isinstance(version, int) and version > IDENTITY_VERSION:
            problems.append(f"{IDENTITY_FILE} identity_version {version} is newer than this zlops reads "
                            f"({IDENTITY_VERSION}); upgrade zlops")
        missing = missing_axes(ident)
        if missing:
            problems.append(f"{IDENTITY_FILE} lacks caliber axes: {', '.join(missing)}")
        _check_backend(f"{IDENTITY_FILE} key backend", ident, manifest, problems)
    if recorded is not None:
        _check_backend(f"{MANIFEST} key identity.backend", recorded, manifest, problems)
    if recorded is not None and ident is not None and not missing_axes(recorded) and not missing_axes(ident):
        differ = differing_axes(recorded, ident)
        if differ:
            problems.append(f"{IDENTITY_FILE} disagrees with the manifest's identity on "
                            + ", ".join(f"{axis} ({a!r} in manifest, {b!r} in file)" for axis, a, b in differ))


def _manifest_identity(manifest: dict[str, Any], problems: list[str]) -> dict[str, Any] | None:
    """The manifest's ``identity`` object when it is there; a problem naming the key otherwise."""
    if "identity" not in manifest:
        problems.append(f"{MANIFEST} key identity is missing: the shard's caliber was deleted or never recorded")
        return None
    recorded = manifest["identity"]
    if recorded is None:
        problems.append(f"{MANIFEST} key identity is null: the shard's caliber is unknown")
        return None
    if not isinstance(recorded, dict):
        problems.append(f"{MANIFEST} key identity: expected a JSON object, got {type(recorded).__name__}")
        return None
    missing = missing_axes(recorded)
    if missing:
        problems.append(f"{MANIFEST} key identity lacks caliber axes: {', '.join(missing)}")
    return recorded


def _canonical_backend(name: Any) -> str | None:
    from zlops.backends import resolve_backend_name
    from zlops.errors import BackendUnavailable

    if not isinstance(name, str) or not name:
        return None
    try:
        return resolve_backend_name(name)
    except BackendUnavailable:
        return None


def _check_backend(where: str, ident: dict[str, Any], manifest: dict[str, Any], problems: list[str]) -> None:
    said, ran = ident.get("backend"), manifest.get("backend")
    if said is None or ran is None:
        if ran is None:
            return  # the manifest's own missing backend is reported once, by _check_placement
        problems.append(f"{where} is {said!r}: the identity does not say which backend measured")
        return
    if _canonical_backend(said) != _canonical_backend(ran) or _canonical_backend(said) is None:
        problems.append(f"{where} {said!r} disagrees with {MANIFEST} key backend {ran!r}")


def _check_placement(bundle: Path, manifest: dict[str, Any], problems: list[str]) -> None:
    backend, pool, device = manifest.get("backend"), manifest.get("pool"), manifest.get("device")
    if not isinstance(backend, str) or _canonical_backend(backend) is None:
        problems.append(f"{MANIFEST} key backend {backend!r} is not a known backend")
    if not isinstance(pool, str) or not pool:
        problems.append(f"{MANIFEST} key pool {pool!r} is not a pool name")
    if type(device) is not int or device < 0:
        problems.append(f"{MANIFEST} key device {device!r} is not a device index")
        return
    if bundle.name.isdigit():  # laid out as a run folder's <pool>/<device>/: the folder names must agree
        if int(bundle.name) != device:
            problems.append(f"{MANIFEST} key device {device} disagrees with the bundle's folder {bundle.name}/")
        if isinstance(pool, str) and bundle.parent.name != pool:
            problems.append(f"{MANIFEST} key pool {pool!r} disagrees with the bundle's folder "
                            f"{bundle.parent.name}/{bundle.name}/")


def _ts(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) and value else None
    except ValueError:
        return None


def _check_timing(bundle: Path, manifest: dict[str, Any], problems: list[str]) -> None:
    timing, why = read_json_object(bundle / TIMING_FILE)
    if timing is None:
        problems.append(str(why))
        return
    version = timing.get("timing_version")
    if type(version) is not int or version > TIMING_VERSION:
        problems.append(f"{TIMING_FILE} timing_version {version!r} is not one this zlops reads ({TIMING_VERSION})")
        return
    for key in ("status", "started_at", "ended_at", "exit_code"):
        if timing.get(key) != manifest.get(key):
            problems.append(f"{TIMING_FILE} {key} {timing.get(key)!r} disagrees with {MANIFEST} "
                            f"({manifest.get(key)!r})")
    start, end = _ts(timing.get("started_at")), _ts(timing.get("ended_at"))
    for key in ("started_at", "ended_at"):
        if timing.get(key) is not None and _ts(timing.get(key)) is None:
            problems.append(f"{TIMING_FILE} {key} {timing.get(key)!r} is not an ISO timestamp")
    duration = timing.get("duration_s")
    if duration is not None and not (isinstance(duration, (int, float)) and math.isfinite(duration)
                                     and duration >= 0):
        problems.append(f"{TIMING_FILE} duration_s {duration!r} is not a non-negative number")
    elif start and end:
        if end < start:
            problems.append(f"{TIMING_FILE} ended_at is before started_at")
        elif duration is not None and abs((end - start).total_seconds() - duration) > 1.0:
            problems.append(f"{TIMING_FILE} duration_s {duration:g} disagrees with ended_at - started_at "
                            f"({(end - start).total_seconds():g} s)")
