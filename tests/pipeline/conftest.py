from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fake_upstream import Upstream, config_data

from zlops.config.settings import Config, parse_config


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    return Upstream(tmp_path / "upstream")


@pytest.fixture
def make_config(tmp_path: Path, upstream: Upstream) -> Callable[..., Config]:
    def make(**kw: object) -> Config:
        return parse_config(config_data(tmp_path / "home", upstream.path, **kw), source="test.yaml")  # type: ignore[arg-type]

    return make
