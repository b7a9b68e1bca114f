"""system_site_packages on a GPU host whose framework lives in a venv (torch in /opt/torch/.venv)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from zlops.host import envs

pytestmark = pytest.mark.slow


def _site(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                         capture_output=True, text=True).stdout.strip()
    return Path(out)


@pytest.mark.parametrize("uv_bin", ["auto", None])
def test_suite_venv_sees_the_packages_of_the_venv_zlops_runs_from(tmp_path: Path, uv_bin: str | None) -> None:
    parent = tmp_path / "torch-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(parent)], check=True)
    (_site(parent / "bin" / "python") / "fake_torch.py").write_text("VERSION = 'preinstalled'\n")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    req = envs.EnvRequest(install=(("python", "-c", "import fake_torch"),), dependency_globs=(),
                          system_site_packages=True, python=str(parent / "bin" / "python"))
    res = envs.ensure_env(worktree, req, tmp_path / "envs", log_path=tmp_path / "log", uv_bin=uv_bin)
    out = subprocess.run([str(res.venv / "bin" / "python"), "-c", "import fake_torch; print(fake_torch.VERSION)"],
                         check=True, capture_output=True, text=True).stdout.strip()
    assert out == "preinstalled"
    # without system_site_packages the suite is isolated from it
    iso = envs.EnvRequest(install=(), dependency_globs=(), system_site_packages=False,
                          python=str(parent / "bin" / "python"))
    wt2 = tmp_path / "wt2"
    wt2.mkdir()
    res2 = envs.ensure_env(wt2, iso, tmp_path / "envs2", log_path=tmp_path / "log2", uv_bin=uv_bin)
    done = subprocess.run([str(res2.venv / "bin" / "python"), "-c", "import fake_torch"], capture_output=True)
    assert done.returncode != 0
