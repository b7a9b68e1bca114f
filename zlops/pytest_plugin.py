"""A pytest plugin for Python harnesses: the run identity, and foreign vendor modules at session end.

Load it explicitly (it registers no ``pytest11`` entry point, so it never loads by surprise)::

    pytest -p zlops.pytest_plugin --zlops-identity {artifacts}/run_identity.json ...

**Run identity.** With ``--zlops-identity PATH`` (default ``$ZLOPS_IDENTITY_OUT``; neither: nothing
is written) the plugin writes what the harness knows of its caliber at session start and again at
session end (by then torch/triton are imported and have versions). Only axes it knows are written,
because zlops' runner merges this file into the shard's ``run_identity.json`` with the harness
winning (:func:`zlops.identity.build_identity`): an axis written as null would erase the backend's.

=================  ==========================================================================
axis               source
=================  ==========================================================================
backend            ``ZL_BACKEND`` (aliases resolved: nvidia -> cuda)
timer              ``ZL_TIMER``, else the backend's capability (graph where it can capture)
direct_repeat      ``ZL_DIRECT_REPEAT`` (default 1)
bench_level        ``ZL_BENCH_LEVEL`` or ``BENCH_LEVEL``
shape_mode         ``SHAPE_MODE``
tuner_cache        ``ZL_ISOLATE_TUNER_CACHE``: ``inherited`` when 1, else ``shared``
autotune_mode      ``ZL_AUTOTUNE_MODE`` (record / replay)
framework          ``{"torch": ..., "triton": ...}`` for those already imported (never imported here)
=================  ==========================================================================

**Foreign vendor modules.** An import only proves a ``.py`` is on disk: FlagGems'
``from flag_gems.runtime.backend._nvidia.hopper.ops.mm import router_gemm`` succeeds on every
backend, and the seed ran the NVIDIA Hopper kernel on an MThreads S5000 that way. At session end
the plugin scans ``sys.modules`` for modules under each vendor root and prints
``FOREIGN_VENDOR_MODULE vendors=<list> modules=<list>`` when a vendor other than ours had one
imported. Roots are compared path segment by segment, never by string prefix, so
``..._nvidia_ext`` is not ``_nvidia``. It reports, it never fails the session: loading another
vendor's module is not proof of a problem, but when a result looks wrong it is the first line to check.

Our vendor: ``--zlops-vendor``, else ``ZL_BACKEND`` mapped to the FlagGems vendor name (cuda ->
nvidia, musa -> mthreads, ascend -> ascend, rocm -> amd, or a FlagGems vendor name itself). Vendor
roots: FlagGems' ``flag_gems.runtime.backend._<vendor>`` for its 16 vendors, replaced by the
``zlops_vendor_roots`` ini lines or ``--zlops-vendor-root VENDOR=DOTTED.ROOT`` options when given.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from zlops.errors import BackendUnavailable
from zlops.identity import IDENTITY_VERSION

#: FlagGems ``runtime/common.py`` vendors, in its enum order
FLAGGEMS_VENDORS: tuple[str, ...] = (
    "nvidia", "ascend", "mthreads", "amd", "metax", "cambricon", "iluvatar", "kunlunxin", "hygon", "enflame",
    "aipu", "tsingmicro", "sunrise", "spacemit", "thead", "arm",
)
DEFAULT_VENDOR_ROOTS: dict[str, tuple[str, ...]] = {
    v: ("flag_gems", "runtime", "backend", f"_{v}") for v in FLAGGEMS_VENDORS
}
#: zlops backend -> FlagGems vendor name
BACKEND_VENDORS: dict[str, str] = {"cuda": "nvidia", "musa": "mthreads", "ascend": "ascend", "rocm": "amd"}
FRAMEWORKS: tuple[str, ...] = ("torch", "triton")
TOKEN = "FOREIGN_VENDOR_MODULE"

_identity_key = pytest.StashKey[Path | None]()
_report_key = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("zlops", "zlops run identity and vendor-module report")
    group.addoption("--zlops-identity", metavar="PATH", default=None,
                    help="write the run identity JSON here (default: $ZLOPS_IDENTITY_OUT; unset: not written)")
    group.addoption("--zlops-vendor", metavar="NAME", default=None,
                    help="our FlagGems vendor name (default: from ZL_BACKEND, e.g. cuda -> nvidia)")
    group.addoption("--zlops-vendor-root", metavar="VENDOR=DOTTED.ROOT", action="append", default=None,
                    help="a vendor's module root (repeatable); given roots replace FlagGems' defaults")
    parser.addini("zlops_vendor_roots", type="linelist", default=[],
                  help="VENDOR=DOTTED.ROOT lines; given roots replace FlagGems' defaults")


# --- pure parts -------------------------------------------------------------------------------------

def parse_roots(entries: Iterable[str]) -> dict[str, tuple[tuple[str, ...], ...]]:
    """``["mthreads=a.b._mthreads", ...]`` -> vendor -> root segment tuples; a bad entry raises ValueError."""
    out: dict[str, list[tuple[str, ...]]] = {}
    for entry in entries:
        vendor, sep, root = entry.partition("=")
        segments = tuple(root.strip().split("."))
        if not sep or not vendor.strip() or not all(segments):
            raise ValueError(f"vendor root {entry!r}: expected VENDOR=dotted.module.root")
        out.setdefault(vendor.strip().lower(), []).append(segments)
    return {v: tuple(r) for v, r in out.items()}


def vendor_of(module: str, roots: Mapping[str, Iterable[tuple[str, ...]]]) -> str | None:
    """The vendor whose root is the longest segment-wise prefix of ``module`` (None: no vendor's).

    ``a.b._nvidia.ops`` is under ``a.b._nvidia``; ``a.b._nvidia_ext.x`` is not (segments differ).
    """
    segments = tuple(module.split("."))
    best: tuple[int, str] | None = None
    for vendor, vendor_roots in roots.items():
        for root in vendor_roots:
            if segments[:len(root)] == root and (best is None or len(root) > best[0]):
                best = (len(root), vendor)
    return None if best is None else best[1]


def foreign_modules(modules: Iterable[str], roots: Mapping[str, Iterable[tuple[str, ...]]],
                    ours: str | None) -> dict[str, list[str]]:
    """Vendor -> sorted imported module names, for every vendor other than ``ours``."""
    out: dict[str, list[str]] = {}
    for name in modules:
        vendor = vendor_of(name, roots)
        if vendor is not None and vendor != ours:
            out.setdefault(vendor, []).append(name)
    return {v: sorted(names) for v, names in sorted(out.items())}


def our_vendor(explicit: str | None, env: Mapping[str, str]) -> str | None:
    """``explicit``, else ZL_BACKEND mapped to its FlagGems vendor name; None when unknown."""
    if explicit:
        return explicit.strip().lower()
    backend = (env.get("ZL_BACKEND") or "").strip().lower()
    if not backend:
        return None
    if backend in FLAGGEMS_VENDORS:
        return backend
    from zlops.backends import resolve_backend_name

    try:
        return BACKEND_VENDORS.get(resolve_backend_name(backend))
    except BackendUnavailable:
        return None


def harness_identity(env: Mapping[str, str], modules: Mapping[str, Any]) -> dict[str, Any]:
    """The identity axes this harness knows, from its environment and the already-imported frameworks."""
    from zlops.backends import get_spec

    ident: dict[str, Any] = {"identity_version": IDENTITY_VERSION, "written_by": __name__}
    spec = None
    if env.get("ZL_BACKEND"):
        try:
            spec = get_spec(env["ZL_BACKEND"])
            ident["backend"] = spec.name
        except BackendUnavailable:
            ident["backend"] = env["ZL_BACKEND"]
    if env.get("ZL_TIMER"):
        ident["timer"] = env["ZL_TIMER"].strip().lower()
    elif spec is not None:  # zlops.timing's choice: the backend's default timer where it can capture
        ident["timer"] = spec.default_timer if spec.supports_graph_capture else "direct"
    try:
        ident["direct_repeat"] = max(1, int(env.get("ZL_DIRECT_REPEAT", "1").strip() or 1))
    except ValueError:
        ident["direct_repeat"] = env["ZL_DIRECT_REPEAT"]  # recorded as given: a caliber, not a crash
    level = env.get("ZL_BENCH_LEVEL") or env.get("BENCH_LEVEL")
    if level:
        ident["bench_level"] = level
    if env.get("SHAPE_MODE"):
        ident["shape_mode"] = env["SHAPE_MODE"]
    ident["tuner_cache"] = "inherited" if env.get("ZL_ISOLATE_TUNER_CACHE", "").strip() == "1" else "shared"
    if env.get("ZL_AUTOTUNE_MODE"):
        ident["autotune_mode"] = env["ZL_AUTOTUNE_MODE"].strip().lower()
    framework = {name: str(getattr(modules[name], "__version__", "unknown")) for name in FRAMEWORKS
                 if name in modules}
    if framework:
        ident["framework"] = framework
    return ident


def _write(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str), encoding="utf-8")
    os.replace(tmp, path)


# --- hooks ------------------------------------------------------------------------------------------

def _identity_path(config: pytest.Config) -> Path | None:
    value = config.getoption("zlops_identity") or os.environ.get("ZLOPS_IDENTITY_OUT")
    return Path(value) if value else None


def _roots(config: pytest.Config) -> dict[str, tuple[tuple[str, ...], ...]]:
    entries = list(config.getoption("zlops_vendor_root") or []) + list(config.getini("zlops_vendor_roots"))
    if not entries:
        return {v: (r,) for v, r in DEFAULT_VENDOR_ROOTS.items()}
    return parse_roots(entries)


def pytest_configure(config: pytest.Config) -> None:
    try:
        _roots(config)
    except ValueError as exc:  # a typo in the roots is a usage error, told before any test runs
        raise pytest.UsageError(f"zlops: {exc}") from None
    config.stash[_report_key] = {"errors": []}
    path = _identity_path(config) if not hasattr(config, "workerinput") else None  # xdist: the controller writes
    config.stash[_identity_key] = path
    if path is not None:
        _write_identity(config, path)


def _write_identity(config: pytest.Config, path: Path, extra: Mapping[str, Any] | None = None) -> None:
    try:
        _write(path, {**harness_identity(os.environ, sys.modules), **(extra or {})})
    except OSError as exc:  # reported in the summary; an identity we cannot write never fails the tests
        config.stash[_report_key]["errors"].append(f"cannot write the run identity {path}: {exc}")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    report = config.stash[_report_key]
    ours = our_vendor(config.getoption("zlops_vendor"), os.environ)
    imported = list(sys.modules)  # a copy: the dict may change while we read it
    report["ours"] = ours
    report["foreign"] = foreign_modules(imported, _roots(config), ours)
    path = config.stash[_identity_key]
    if path is not None:
        extra = {"foreign_vendor_modules": report["foreign"]} if ours is not None else {}
        _write_identity(config, path, extra)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    report = config.stash.get(_report_key, {})
    for error in report.get("errors", []):
        terminalreporter.write_line(f"zlops: {error}", yellow=True)
    foreign: dict[str, list[str]] = report.get("foreign") or {}
    if not foreign:
        return
    vendors = ",".join(foreign)
    modules = ",".join(m for names in foreign.values() for m in names)
    if report.get("ours") is None:
        terminalreporter.write_line(f"zlops: vendor modules imported, but our vendor is unknown (set ZL_BACKEND or "
                                    f"--zlops-vendor): vendors={vendors} modules={modules}", yellow=True)
        return
    terminalreporter.write_line(f"{TOKEN} vendors={vendors} modules={modules}  (ours: {report['ours']}; "
                                "an import touches no device, so another vendor's kernel may have run here)",
                                yellow=True)
