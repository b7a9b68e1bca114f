"""zlops.pytest_plugin: the run identity it writes, and FOREIGN_VENDOR_MODULE on fake vendor module trees.

The plugin runs in a pytest subprocess (pytester), so the fake ``flag_gems`` packages made here never
reach this process's sys.modules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zlops.identity import build_identity
from zlops.pytest_plugin import (
    DEFAULT_VENDOR_ROOTS,
    FLAGGEMS_VENDORS,
    foreign_modules,
    harness_identity,
    our_vendor,
    parse_roots,
    vendor_of,
)

pytest_plugins = ["pytester"]

BACKEND = "flag_gems.runtime.backend"
ZL_VARS = ("ZL_BACKEND", "ZL_TIMER", "ZL_DIRECT_REPEAT", "ZL_BENCH_LEVEL", "BENCH_LEVEL", "SHAPE_MODE",
           "ZL_ISOLATE_TUNER_CACHE", "ZL_AUTOTUNE_MODE", "ZLOPS_IDENTITY_OUT")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ZL_VARS:
        monkeypatch.delenv(var, raising=False)


def _vendor_tree(pytester: pytest.Pytester) -> None:
    """flag_gems/runtime/backend/{_nvidia/ops, _nvidia_ext, _mthreads/ops/mm.py} and a fake triton."""
    files = {
        "flag_gems/__init__.py": "", "flag_gems/runtime/__init__.py": "",
        "flag_gems/runtime/backend/__init__.py": "",
        "flag_gems/runtime/backend/_nvidia/__init__.py": "",
        "flag_gems/runtime/backend/_nvidia/ops/__init__.py": "def router_gemm():\n    return 'hopper'\n",
        "flag_gems/runtime/backend/_nvidia_ext/__init__.py": "",
        "flag_gems/runtime/backend/_mthreads/__init__.py": "",
        "flag_gems/runtime/backend/_mthreads/ops/__init__.py": "",
        "flag_gems/runtime/backend/_mthreads/ops/mm.py": "def router_gemm():\n    return 'musa'\n",
        "triton/__init__.py": "__version__ = '9.9.9'\n",
    }
    for rel, text in files.items():
        path = pytester.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _run(pytester: pytest.Pytester, test_body: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_bench=test_body)
    return pytester.runpytest_subprocess("-p", "zlops.pytest_plugin", "-W", "error", *args)


NVIDIA_GATE = f"""
try:
    from {BACKEND}._nvidia.ops import router_gemm  # the gate that never fires: an import touches no device
    ROUTER_GEMM_AVAILABLE = True
except Exception:
    ROUTER_GEMM_AVAILABLE = False
import {BACKEND}._nvidia_ext
import {BACKEND}._mthreads.ops.mm

def test_router_gemm():
    assert router_gemm() == "hopper"
"""


# --- the vendor report --------------------------------------------------------------------------------

def test_foreign_vendor_module_is_reported_and_the_session_passes(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _vendor_tree(pytester)
    monkeypatch.setenv("ZL_BACKEND", "musa")
    result = _run(pytester, NVIDIA_GATE)
    assert result.ret == 0
    result.assert_outcomes(passed=1)
    line = next(x for x in result.outlines if x.startswith("FOREIGN_VENDOR_MODULE"))
    assert line.startswith(f"FOREIGN_VENDOR_MODULE vendors=nvidia modules={BACKEND}._nvidia,{BACKEND}._nvidia.ops ")
    assert "_nvidia_ext" not in line and "_mthreads" not in line  # ours, and not a vendor at all


def test_our_own_vendor_and_a_longer_name_are_not_foreign(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _vendor_tree(pytester)
    monkeypatch.setenv("ZL_BACKEND", "cuda")
    result = _run(pytester, f"import {BACKEND}._nvidia.ops\nimport {BACKEND}._nvidia_ext\n"
                            "def test_ok():\n    pass\n")
    assert result.ret == 0
    assert not [x for x in result.outlines if "FOREIGN_VENDOR_MODULE" in x]


def test_the_vendor_option_overrides_the_backend(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _vendor_tree(pytester)
    monkeypatch.setenv("ZL_BACKEND", "cuda")
    result = _run(pytester, f"import {BACKEND}._nvidia.ops\ndef test_ok():\n    pass\n", "--zlops-vendor", "mthreads")
    assert any(x.startswith("FOREIGN_VENDOR_MODULE vendors=nvidia ") for x in result.outlines)


def test_a_failing_session_keeps_its_own_exit_code(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _vendor_tree(pytester)
    monkeypatch.setenv("ZL_BACKEND", "ascend")
    result = _run(pytester, f"import {BACKEND}._mthreads.ops.mm\ndef test_bad():\n    assert False\n")
    assert result.ret == 1
    assert any(x.startswith(f"FOREIGN_VENDOR_MODULE vendors=mthreads modules={BACKEND}._mthreads,")
               for x in result.outlines)


def test_unknown_vendor_lists_modules_without_the_token(pytester: pytest.Pytester) -> None:
    _vendor_tree(pytester)
    result = _run(pytester, f"import {BACKEND}._nvidia\ndef test_ok():\n    pass\n")
    assert result.ret == 0
    assert not [x for x in result.outlines if x.startswith("FOREIGN_VENDOR_MODULE")]
    assert any("our vendor is unknown" in x and "vendors=nvidia" in x for x in result.outlines)


def test_vendor_roots_from_the_ini_replace_flaggems(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for rel in ("kernels/__init__.py", "kernels/cuda/__init__.py", "kernels/cuda_graphs/__init__.py",
                "kernels/musa/__init__.py"):
        (pytester.path / rel).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / rel).write_text("")
    pytester.makeini("[pytest]\nzlops_vendor_roots =\n    nvidia=kernels.cuda\n    mthreads=kernels.musa\n")
    monkeypatch.setenv("ZL_BACKEND", "musa")
    result = _run(pytester, "import kernels.cuda_graphs\nimport kernels.musa\ndef test_ok():\n    pass\n")
    assert not [x for x in result.outlines if "FOREIGN_VENDOR_MODULE" in x]
    result = _run(pytester, "import kernels.cuda\ndef test_ok():\n    pass\n")
    assert any(x.startswith("FOREIGN_VENDOR_MODULE vendors=nvidia modules=kernels.cuda ") for x in result.outlines)


def test_a_malformed_vendor_root_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "def test_ok():\n    pass\n", "--zlops-vendor-root", "kernels.cuda")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*vendor root 'kernels.cuda': expected VENDOR=dotted.module.root*"])


def test_vendor_roots_compare_segments_not_prefixes() -> None:
    roots = {v: (r,) for v, r in DEFAULT_VENDOR_ROOTS.items()}
    assert len(FLAGGEMS_VENDORS) == 16
    assert vendor_of(f"{BACKEND}._nvidia", roots) == "nvidia"
    assert vendor_of(f"{BACKEND}._nvidia.hopper.ops.mm", roots) == "nvidia"
    assert vendor_of(f"{BACKEND}._nvidia_ext.x", roots) is None
    assert vendor_of(f"{BACKEND}", roots) is None
    assert vendor_of("flag_gems.runtime.backend_nvidia", roots) is None
    nested = parse_roots(["outer=a.b", "inner=a.b._nvidia"])
    assert vendor_of("a.b._nvidia.ops", nested) == "inner" and vendor_of("a.b.other", nested) == "outer"
    assert foreign_modules(["a.b._nvidia", "a.b._nvidia.ops", "a.b.x", "c"], nested, "outer") == {
        "inner": ["a.b._nvidia", "a.b._nvidia.ops"]}


@pytest.mark.parametrize(("backend", "vendor"), [
    ("cuda", "nvidia"), ("nvidia", "nvidia"), ("musa", "mthreads"), ("moore", "mthreads"), ("ascend", "ascend"),
    ("npu", "ascend"), ("rocm", "amd"), ("cambricon", "cambricon"), ("cpu", None), ("nonsense", None), ("", None),
])
def test_our_vendor_from_zl_backend(backend: str, vendor: str | None) -> None:
    assert our_vendor(None, {"ZL_BACKEND": backend}) == vendor
    assert our_vendor("Metax", {"ZL_BACKEND": backend}) == "metax"


# --- the run identity ---------------------------------------------------------------------------------

def test_identity_is_written_from_the_environment(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    _vendor_tree(pytester)
    out = tmp_path / "art" / "run_identity.json"
    for var, value in {"ZL_BACKEND": "moore", "ZL_DIRECT_REPEAT": "3", "BENCH_LEVEL": "core",
                       "SHAPE_MODE": "upstream", "ZL_ISOLATE_TUNER_CACHE": "1", "ZL_AUTOTUNE_MODE": "Record"}.items():
        monkeypatch.setenv(var, value)
    result = _run(pytester, "import triton\ndef test_ok():\n    pass\n", "--zlops-identity", str(out))
    assert result.ret == 0
    ident = json.loads(out.read_text())
    assert {k: ident[k] for k in ("backend", "timer", "direct_repeat", "bench_level", "shape_mode", "tuner_cache",
                                  "autotune_mode", "framework")} == {
        "backend": "musa", "timer": "graph", "direct_repeat": 3, "bench_level": "core", "shape_mode": "upstream",
        "tuner_cache": "inherited", "autotune_mode": "record", "framework": {"triton": "9.9.9"}}
    assert "torch" not in ident["framework"]  # never imported by the plugin
    assert ident["foreign_vendor_modules"] == {}


def test_identity_path_from_the_environment_and_the_timer_override(pytester: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    out = tmp_path / "ident.json"
    monkeypatch.setenv("ZLOPS_IDENTITY_OUT", str(out))
    monkeypatch.setenv("ZL_BACKEND", "cuda")
    monkeypatch.setenv("ZL_TIMER", "direct")
    monkeypatch.setenv("ZL_BENCH_LEVEL", "comprehensive")
    monkeypatch.setenv("BENCH_LEVEL", "core")
    assert _run(pytester, "def test_ok():\n    pass\n").ret == 0
    ident = json.loads(out.read_text())
    assert (ident["timer"], ident["bench_level"], ident["tuner_cache"]) == ("direct", "comprehensive", "shared")
    assert "framework" not in ident and "autotune_mode" not in ident and "shape_mode" not in ident


def test_no_path_writes_nothing(pytester: pytest.Pytester) -> None:
    assert _run(pytester, "def test_ok():\n    pass\n").ret == 0
    assert not list(pytester.path.rglob("*.json"))


def test_unknown_axes_are_left_to_the_runner() -> None:
    """build_identity lets the harness win: an axis the harness does not know must not erase the backend's."""
    harness = harness_identity({}, {})
    assert "timer" not in harness and "backend" not in harness
    ident = build_identity(backend_identity={"backend": "cuda", "timer": "graph"}, rounds=3, pins={}, harness=harness)
    assert (ident["backend"], ident["timer"], ident["tuner_cache"], ident["direct_repeat"]) == (
        "cuda", "graph", "shared", 1)
    assert harness_identity({"ZL_BACKEND": "ascend"}, {})["timer"] == "direct"  # no graph capture there
