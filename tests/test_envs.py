"""Per-worktree environments: cold build, cache reuse with re-pointed editable installs, keys, eviction.

Builds run offline (UV_OFFLINE=1): the tiny project's only build requirement, setuptools, comes from
the local uv cache.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from local_git import LocalRepo

from zlops.errors import EnvBuildError
from zlops.host import gitops
from zlops.host.envs import (
    STAMP,
    EnvRequest,
    base_python,
    ensure_env,
    env_key,
    find_uv,
    install_argv,
)

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tinyproj"
version = "0.1.0"

[project.scripts]
tinyproj-where = "tinyproj:where"

[tool.setuptools]
packages = ["tinyproj"]
"""


def _module(value: int) -> str:
    return f"VALUE = {value}\n\ndef where():\n    print(__file__, VALUE)\n"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("PIP_NO_INDEX", "1")


@pytest.fixture
def uv_bin() -> str:
    uv = find_uv()
    if uv is None:
        pytest.skip("uv is not installed")
    return uv


def _req(install: list[list[str]] | None = None, **kw: object) -> EnvRequest:
    return EnvRequest(
        install=tuple(tuple(a) for a in (install if install is not None else [["pip", "install", "-e", "."]])),
        dependency_globs=("pyproject.toml", "setup.py", "setup.cfg", "requirements*.txt"),
        system_site_packages=False, python=base_python(), **kw)  # type: ignore[arg-type]


class Project:
    """An upstream whose commits A and B differ only in source; C changes pyproject.toml."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        up = LocalRepo(tmp_path / "upstream")
        self.a = up.commit({"pyproject.toml": PYPROJECT, "tinyproj/__init__.py": _module(1)})
        self.b = up.commit({"tinyproj/__init__.py": _module(2), "README": "docs only"})
        self.c = up.commit({"pyproject.toml": PYPROJECT.replace("0.1.0", "0.2.0")})
        self.mirror = gitops.ensure_mirror(str(up.path), tmp_path / "mirror.git")
        gitops.fetch_branch(self.mirror, "main")

    def worktree(self, sha: str) -> Path:
        return gitops.add_worktree(self.mirror, sha, self.tmp / "worktrees" / sha[:12])


def _py(venv: Path, code: str, cwd: Path) -> str:
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=cwd, check=True, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin"}).stdout.strip()


@pytest.mark.slow
def test_cold_build_then_reuse_repoints_the_editable_install(tmp_path: Path, uv_bin: str) -> None:
    proj = Project(tmp_path)
    envs, log = tmp_path / "envs", tmp_path / "install.log"
    wt_a, wt_b = proj.worktree(proj.a), proj.worktree(proj.b)

    first = ensure_env(wt_a, _req(), envs, log_path=log, uv_bin=uv_bin)
    assert (first.reused, first.tool, first.venv) == (False, "uv", wt_a / ".venv")
    assert _py(first.venv, "import tinyproj; print(tinyproj.VALUE)", tmp_path) == "1"
    template = envs / first.key / "venv"
    stamp = json.loads((envs / first.key / STAMP).read_text())
    assert stamp["key"] == first.key and stamp["tool"] == "uv" and stamp["built_from"] == str(wt_a)
    # the template's own scripts point at the template, not at the worktree it was built in
    assert str(wt_a) not in (template / "bin" / "activate").read_text()

    second = ensure_env(wt_b, _req(), envs, log_path=log, uv_bin=uv_bin)
    assert second.reused is True and second.key == first.key and second.venv == wt_b / ".venv"
    out = _py(second.venv, "import tinyproj; print(tinyproj.__file__); print(tinyproj.VALUE)", tmp_path)
    assert out.splitlines() == [str(wt_b / "tinyproj" / "__init__.py"), "2"]
    script = second.venv / "bin" / "tinyproj-where"
    assert script.read_text().splitlines()[0] == f"#!{second.venv}/bin/python"
    where = subprocess.run([str(script)], check=True, capture_output=True, text=True).stdout.split()
    assert where == [str(wt_b / "tinyproj" / "__init__.py"), "2"]
    for name in ("activate", "activate.fish", "activate.csh"):
        text = (second.venv / "bin" / name).read_text()
        assert str(second.venv) in text and str(template) not in text and str(wt_a) not in text
    # relocating the copy never writes through to the template (hard links, in-place rewrites)
    template_activate = (template / "bin" / "activate").read_text()
    assert str(template) in template_activate and str(second.venv) not in template_activate
    # the first worktree's environment is untouched by the second one
    assert _py(first.venv, "import tinyproj; print(tinyproj.VALUE)", tmp_path) == "1"
    # a worktree's env survives the removal of the worktree the template was built from
    gitops.remove_worktree(proj.mirror, wt_a)
    assert _py(second.venv, "import tinyproj; print(tinyproj.VALUE)", tmp_path) == "2"


@pytest.mark.slow
def test_reuse_with_a_regular_install_rebuilds_the_project_from_the_new_commit(tmp_path: Path, uv_bin: str) -> None:
    proj = Project(tmp_path)
    envs, log, req = tmp_path / "envs", tmp_path / "install.log", _req([["pip", "install", "."]])
    first = ensure_env(proj.worktree(proj.a), req, envs, log_path=log, uv_bin=uv_bin)
    wt_b = proj.worktree(proj.b)
    second = ensure_env(wt_b, req, envs, log_path=log, uv_bin=uv_bin)
    assert (first.reused, second.reused) == (False, True)
    out = _py(second.venv, "import tinyproj; print(tinyproj.__file__); print(tinyproj.VALUE)", tmp_path)
    assert out.splitlines()[1] == "2", "the copied venv still holds the first commit's build of the project"
    assert out.splitlines()[0].startswith(str(second.venv))


def test_key_follows_dependency_files_not_source(tmp_path: Path) -> None:
    proj = Project(tmp_path)
    req = _req()
    ka = env_key(proj.worktree(proj.a), req, python_ver="3.11.7")
    kb = env_key(proj.worktree(proj.b), req, python_ver="3.11.7")
    kc = env_key(proj.worktree(proj.c), req, python_ver="3.11.7")
    assert ka == kb  # only tinyproj/ and README changed
    assert kc != ka  # pyproject.toml changed


def test_key_follows_install_python_site_packages_and_env(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    base = env_key(tmp_path, _req(), python_ver="3.11.7")
    assert env_key(tmp_path, _req(), python_ver="3.11.7") == base
    assert env_key(tmp_path, _req([["pip", "install", "."]]), python_ver="3.11.7") != base
    assert env_key(tmp_path, _req(), python_ver="3.12.1") != base
    assert env_key(tmp_path, _req(extra_env=(("CC", "clang"),)), python_ver="3.11.7") != base
    sys_site = EnvRequest(install=_req().install, dependency_globs=_req().dependency_globs,
                          system_site_packages=True, python=base_python())
    assert env_key(tmp_path, sys_site, python_ver="3.11.7") != base
    (tmp_path / "requirements-dev.txt").write_text("pytest\n")
    with_reqs = env_key(tmp_path, _req(), python_ver="3.11.7")
    assert with_reqs != base
    (tmp_path / "requirements-dev.txt").write_text("pytest>=8\n")
    assert env_key(tmp_path, _req(), python_ver="3.11.7") != with_reqs
    (tmp_path / "notes.txt").write_text("not a dependency file")
    assert env_key(tmp_path, _req(), python_ver="3.11.7") != base


V = Path("/w/.venv")
VPY = str(V / "bin" / "python")


@pytest.mark.parametrize(("argv", "tool", "uv", "expected"), [
    (["pip", "install", "-e", "."], "uv", "/u/uv", ["/u/uv", "pip", "install", "-e", ".", "--python", VPY]),
    (["pip3", "install", "numpy"], "uv", "/u/uv", ["/u/uv", "pip", "install", "numpy", "--python", VPY]),
    (["python", "-m", "pip", "install", "x"], "uv", "/u/uv", ["/u/uv", "pip", "install", "x", "--python", VPY]),
    (["python3", "-m", "pip", "install", "x"], "uv", "/u/uv", ["/u/uv", "pip", "install", "x", "--python", VPY]),
    (["pip", "install", "-e", "."], "venv", None, [VPY, "-m", "pip", "install", "-e", "."]),
    (["python", "-m", "pip", "install", "x"], "venv", None, [VPY, "-m", "pip", "install", "x"]),
    (["pip", "install", "x"], "uv", None, [VPY, "-m", "pip", "install", "x"]),
    (["python", "setup.py", "build_ext", "--inplace"], "uv", "/u/uv", [VPY, "setup.py", "build_ext", "--inplace"]),
    (["python3", "-c", "print(1)"], "venv", None, [VPY, "-c", "print(1)"]),
    (["python", "-m", "build"], "uv", "/u/uv", [VPY, "-m", "build"]),
    (["make", "-j8"], "uv", "/u/uv", ["make", "-j8"]),
    (["cmake", "--build", "build"], "venv", None, ["cmake", "--build", "build"]),
    (["pipx", "install", "x"], "uv", "/u/uv", ["pipx", "install", "x"]),
])
def test_install_argv_translation(argv: list[str], tool: str, uv: str | None, expected: list[str]) -> None:
    assert install_argv(argv, V, tool, uv) == expected


@pytest.mark.slow
def test_failing_install_step_names_the_step_and_the_log(tmp_path: Path, uv_bin: str) -> None:
    (tmp_path / "wt").mkdir()
    log = tmp_path / "logs" / "install.log"
    step = ["python", "-c", "import sys; print('BUILD-EXPLODED'); sys.exit(7)"]
    req = _req([["python", "-c", "print('first step ok')"], step])
    with pytest.raises(EnvBuildError) as ei:
        ensure_env(tmp_path / "wt", req, tmp_path / "envs", log_path=log, uv_bin=uv_bin)
    msg = str(ei.value)
    assert f"install step {step!r} failed" in msg and f"(log: {log})" in msg and "exit code: 7" in msg
    text = log.read_text()
    assert "first step ok" in text and "BUILD-EXPLODED" in text
    assert not list((tmp_path / "envs").glob(f"*/{STAMP}")), "a failed build must not become a template"


@pytest.mark.slow
def test_install_steps_run_in_the_worktree_inside_the_venv(tmp_path: Path, uv_bin: str) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    code = ("import json, os, sys; json.dump({'prefix': sys.prefix, 'venv': os.environ.get('VIRTUAL_ENV'), "
            "'cc': os.environ.get('CC'), 'token': os.environ.get('SLACK_BOT_TOKEN')}, open('seen.json', 'w'))")
    res = ensure_env(wt, _req([["python", "-c", code]], extra_env=(("CC", "clang-17"),)), tmp_path / "envs",
                     log_path=tmp_path / "log", uv_bin=uv_bin)
    seen = json.loads((wt / "seen.json").read_text())
    assert seen == {"prefix": str(res.venv), "venv": str(res.venv), "cc": "clang-17", "token": None}


@pytest.mark.slow
def test_eviction_keeps_cache_size_templates_least_recently_used_first(tmp_path: Path, uv_bin: str) -> None:
    envs = tmp_path / "envs"

    def build(tag: str) -> str:
        wt = tmp_path / f"wt-{tag}"
        wt.mkdir(exist_ok=True)
        res = ensure_env(wt, _req([["python", "-c", f"print({tag!r})"]]), envs, log_path=tmp_path / "log",
                         cache_size=2, uv_bin=uv_bin)
        return res.key

    def kept() -> set[str]:
        return {p.parent.name for p in envs.glob(f"*/{STAMP}")}

    a = build("a")
    b = build("b")
    assert kept() == {a, b}
    assert build("a") == a  # reuse refreshes a's place in the LRU order
    c = build("c")
    assert kept() == {a, c}
    d = build("d")
    assert kept() == {c, d}


@pytest.mark.slow
def test_use_cache_false_builds_without_a_template(tmp_path: Path, uv_bin: str) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    req = _req([["python", "-c", "print(1)"]])
    for _ in range(2):
        res = ensure_env(wt, req, tmp_path / "envs", log_path=tmp_path / "log", use_cache=False, uv_bin=uv_bin)
        assert res.reused is False and (res.venv / "bin" / "python").exists()
    assert not list((tmp_path / "envs").glob(f"*/{STAMP}"))


def _write_wheel(dest: Path) -> Path:
    """A minimal pure-python wheel, so pip can install it offline without any build backend."""
    files = {
        "pipmod/__init__.py": b"ORIGIN = 'wheel'\n",
        "pipmod-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pipmod\nVersion: 1.0\n",
        "pipmod-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: zlops-tests\nRoot-Is-Purelib: true\n"
                                      b"Tag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("pipmod-1.0.dist-info/RECORD,,")
    wheel = dest / "pipmod-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("pipmod-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return wheel


@pytest.mark.slow
def test_without_uv_falls_back_to_venv_and_pip(tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    wheel = _write_wheel(tmp_path)
    req = _req([["pip", "install", "--no-index", "--no-deps", str(wheel)]])
    first = ensure_env(wt, req, tmp_path / "envs", log_path=tmp_path / "log", uv_bin=None)
    assert (first.tool, first.reused) == ("venv", False)
    assert _py(first.venv, "import pipmod, sys; print(pipmod.ORIGIN, sys.prefix)", tmp_path) == f"wheel {first.venv}"
    assert "Successfully installed pipmod-1.0" in (tmp_path / "log").read_text()
    # the copied pip venv works from its new place: pip's own script was relocated
    wt2 = tmp_path / "wt2"
    wt2.mkdir()
    second = ensure_env(wt2, req, tmp_path / "envs", log_path=tmp_path / "log", uv_bin=None)
    assert (second.tool, second.reused) == ("venv", True)
    pip_script = second.venv / "bin" / "pip"
    assert pip_script.read_text().splitlines()[0].startswith(f"#!{second.venv}/bin/python")
    version = subprocess.run([str(pip_script), "--version"], check=True, capture_output=True, text=True).stdout
    assert str(second.venv) in version
    assert str(second.venv) in (second.venv / "bin" / "activate").read_text()
