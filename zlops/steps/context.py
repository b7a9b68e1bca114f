"""The run context every step takes, the store it opens, and the names derived from a run key.

Imports no step module: the modules the steps call (sharding, campaigns, promotion, confirmation)
import this one, and the steps import them, without a cycle.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from zlops.config.settings import Config, SuiteConfig
from zlops.errors import ZlopsError
from zlops.store import Store
from zlops.store.engine import CONNECT_TIMEOUT_S

#: A command that only reads (``zlops runs``, ``zlops alert list``...) answers within seconds when the
#: database is down, instead of retrying for ``database_retry_s`` as a night does: one retry after
#: a short pause (a restart in progress), and connects that give up after this many seconds.
READ_ONLY_RETRY_S = 1.0
READ_ONLY_CONNECT_TIMEOUT_S = 3


@lru_cache(maxsize=8)
def _open_store(url: str, retry_s: float, connect_timeout_s: int = CONNECT_TIMEOUT_S) -> Store:
    from zlops.store.retry import RetryPolicy

    return Store.open(url, retry=RetryPolicy(total_s=retry_s), connect_timeout_s=connect_timeout_s)


def open_store(config: Config, *, read_only: bool = False) -> Store:
    """The store of this config (opened, migrated to head, cached per process); transient database
    faults are retried for ``database_retry_s``, or briefly for a ``read_only`` command
    (:data:`READ_ONLY_RETRY_S`, :data:`READ_ONLY_CONNECT_TIMEOUT_S`): a person waiting on ``zlops runs``
    learns of a dead database in seconds, its URL named (password redacted)."""
    if read_only:
        return _open_store(config.database_url, min(READ_ONLY_RETRY_S, config.database_retry_s),
                           READ_ONLY_CONNECT_TIMEOUT_S)
    return _open_store(config.database_url, config.database_retry_s)


#: What a run label may hold (an Airflow run id, ``--run-id``, a timestamp).
RUN_LABEL_PATTERN = r"[A-Za-z0-9_.:+\-]{1,200}"


def run_label_problem(label: str) -> str | None:
    """Why ``label`` cannot label a run (None when it can): the CLI refuses ``--run-id`` with it up front."""
    if not re.fullmatch(RUN_LABEL_PATTERN, label):
        return f"invalid run label {label!r}: use letters, digits and _ . : + -"
    return None


def make_run_key(kind: str, suite: str, label: str) -> str:
    """``<kind>:<suite>:<label>``; the label is an Airflow run id, a CLI --run-id or a timestamp."""
    problem = run_label_problem(label)
    if problem:
        raise ZlopsError(problem)
    return f"{kind}:{suite}:{label}"


def slug(run_key: str) -> str:
    """A file-system-safe, collision-free name for a run key."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "_", run_key)[:80]
    return f"{clean}-{hashlib.sha1(run_key.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class RunContext:
    """What every step after fetch needs; cheap to rebuild from (config, suite, run_key, sha)."""

    config: Config
    suite_name: str
    run_key: str
    sha: str
    #: devices chosen for pools configured ``devices: auto`` (resolved once, at fetch, kept in the run)
    auto_devices: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def suite(self) -> SuiteConfig:
        return self.config.suite(self.suite_name)

    @property
    def store(self) -> Store:
        """The config's store (:func:`open_store`: one per process)."""
        return open_store(self.config)

    @property
    def mirror_path(self) -> Path:
        return self.config.mirrors_dir / f"{self.suite_name}.git"

    @property
    def worktree(self) -> Path:
        return self.config.worktrees_dir / self.suite_name / f"{self.sha[:12]}-{slug(self.run_key)[-8:]}"

    @property
    def run_dir(self) -> Path:
        return self.config.artifacts_dir / self.suite_name / slug(self.run_key)

    def shard_dir(self, pool: str, device: int) -> Path:
        return self.run_dir / pool / str(device)

    def lock_path(self, what: str) -> Path:
        """A host lock of this run (``prepare``, ``plan``): one process per host does it at a time."""
        return self.config.run_locks_dir / f"{what}-{slug(self.run_key)}.lock"

    def pool_devices(self, pool: str) -> list[int]:
        explicit = self.config.pools[pool].explicit_devices
        if explicit is not None:
            return explicit
        chosen = dict(self.auto_devices)
        if pool not in chosen:
            raise ZlopsError(f"pool {pool} uses devices: auto but this run chose none for it")
        return list(chosen[pool])

    def planned_shards(self) -> list[tuple[str, str, int]]:
        """(pool, backend, device) for every device of every pool the suite runs on."""
        return [(p, self.config.pools[p].backend, d) for p in self.suite.pools for d in self.pool_devices(p)]


@dataclass(frozen=True)
class Prepared:
    """A commit's worktree and venv, ready to run (:func:`zlops.steps.prepare.prepare`)."""

    worktree: Path
    venv: Path
    env_key: str
    env_reused: bool
    env_seconds: float


def context_for(config: Config, suite_name: str, run_key: str) -> RunContext:
    """Rebuild a RunContext from the store (what every task after fetch does)."""
    run = open_store(config).get_run(run_key)
    if run is None:
        raise ZlopsError(f"unknown run {run_key!r}: run the fetch step first")
    auto = tuple((p, tuple(d)) for p, d in run.meta.get("auto_devices", []))
    return RunContext(config, suite_name, run_key, run.sha, auto)
