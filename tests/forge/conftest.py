from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_forge import FakeForge

from zlops.config.settings import Config, parse_config


@pytest.fixture
def forge() -> Iterator[FakeForge]:
    server = FakeForge()
    yield server
    server.close()


@pytest.fixture
def forge_config(tmp_path: Path, forge: FakeForge) -> Callable[..., Config]:
    def make(**forge_kw: Any) -> Config:
        common = {"command": ["python", "b.py", "--out", "{results}"], "format": "zlops-json", "pools": ["local"],
                  "repo": str(tmp_path / "upstream")}
        gh = {"kind": "github", "api_url": forge.github_url, "repo": "acme/kernels", "check_name": "zlops perf",
              "links_url": "https://airflow.example.com/zlops", **forge_kw}
        gl = {"kind": "gitlab", "api_url": forge.gitlab_url, "repo": "acme/kernels", "check_name": "zlops perf",
              **forge_kw}
        return parse_config({"home": str(tmp_path / "home"), "pools": {"local": {"backend": "cpu", "devices": [0]}},
                             "suites": {"ops": {**common, "forge": gh}, "glops": {**common, "forge": gl}},
                             "judge": "simple"}, source="test.yaml")
    return make
