"""Which config file a command reads when ``--config`` is not given (docs/usage.md, "Finding the config").

In this order, the first that applies wins:

1. ``--config PATH`` (``zlops config check PATH``);
2. ``$ZLOPS_CONFIG`` (what the DAG files and Airflow workers read);
3. ``./zlops.yaml`` in the current folder;
4. ``./zlops-demo/zlops.yaml``: the config ``zlops demo`` writes into its default home, so the commands
   the demo and the README suggest work in the folder the demo ran in;
5. ``~/.zlops/zlops.yaml``: the config beside the default ``home``.

A path given by 1 or 2 is used as given, even when it does not exist (the error then names it). When
nothing applies, :class:`~zlops.errors.ConfigError` lists every place searched. Light on purpose: the
CLI imports it before it knows which command runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from zlops.errors import ConfigError

#: The file name of a config in a folder.
CONFIG_NAME = "zlops.yaml"
#: The ``home`` of a config that names none.
DEFAULT_HOME = "~/.zlops"
#: The folder ``zlops demo`` uses when given no ``--home`` (relative to where it runs).
DEMO_HOME = "zlops-demo"
#: The environment variable naming the config.
ENV_VAR = "ZLOPS_CONFIG"
#: ``--config``'s help, in every command that reads a config.
CONFIG_HELP = (f"the config file (default: ${ENV_VAR}, else the first of ./{CONFIG_NAME}, ./{DEMO_HOME}/{CONFIG_NAME}, "
               f"{DEFAULT_HOME}/{CONFIG_NAME})")


@dataclass(frozen=True)
class FoundConfig:
    """The config a command reads, and how it was found (``--config``, ``$ZLOPS_CONFIG`` or ``searched``)."""

    path: Path
    how: str

    @property
    def searched(self) -> bool:
        return self.how == "searched"


def search_paths(*, cwd: Path | None = None, home: Path | None = None) -> tuple[tuple[str, Path], ...]:
    """``(as shown, path)`` of the files looked for, in order, when neither ``--config`` nor
    ``$ZLOPS_CONFIG`` names one."""
    here = Path.cwd() if cwd is None else cwd
    user = Path.home() if home is None else home
    home_dir = DEFAULT_HOME.removeprefix("~/")
    return ((f"./{CONFIG_NAME}", here / CONFIG_NAME),
            (f"./{DEMO_HOME}/{CONFIG_NAME}", here / DEMO_HOME / CONFIG_NAME),
            (f"{DEFAULT_HOME}/{CONFIG_NAME}", user / home_dir / CONFIG_NAME))


def find_config(given: str | os.PathLike[str] | None, *, environ: Mapping[str, str] | None = None,
                cwd: Path | None = None, home: Path | None = None) -> FoundConfig:
    """The config to read (see the module docstring); ConfigError naming every place searched."""
    if given:
        return FoundConfig(Path(given), "--config")
    env = os.environ if environ is None else environ
    if env.get(ENV_VAR):
        return FoundConfig(Path(env[ENV_VAR]), f"${ENV_VAR}")
    candidates = search_paths(cwd=cwd, home=home)
    for _, path in candidates:
        if path.is_file():
            return FoundConfig(path, "searched")
    here = Path.cwd() if cwd is None else cwd
    looked = ", ".join(shown for shown, _ in candidates)
    raise ConfigError(f"no config found: pass --config PATH or set {ENV_VAR} (searched, in this order: --config: "
                      f"not given; ${ENV_VAR}: not set; {looked}: none exists, with . = {here})")
