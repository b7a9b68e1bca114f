"""Results files are checked before they are read: FIFOs, devices, symlinks out of the shard folder
and oversized files fail their shard with a clear error instead of hanging or leaking the night."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest
from fake_upstream import config_data
from fault_upstream import overlaps

from zlops.config.settings import parse_config
from zlops.errors import ParseError
from zlops.formats import _bounded, parse_results
from zlops.model import RunRecord, RunStatus, ShardStatus
from zlops.run.runner import ShardSpec, run_shard
from zlops.steps.context import RunContext, open_store
from zlops.steps.run_device import ingest_shard

SHA = "0123456789abcdef0123456789abcdef01234567"

pytestmark = pytest.mark.timeout(60)  # a FIFO that hangs ingest must fail the test, not the session


def _ctx(tmp_path: Path, **extra: object) -> RunContext:
    data = {**config_data(tmp_path / "home", tmp_path / "upstream", database=f"sqlite:///{tmp_path / 'z.db'}"),
            **extra}
    config = parse_config(data, source="t.yaml")
    run_key = "nightly:fake:faults"
    open_store(config).upsert_run(RunRecord(run_key=run_key, kind="nightly", suite="fake", sha=SHA,
                                                     branch="main", status=RunStatus.RUNNING,
                                                     started_at=datetime.now(timezone.utc)))
    return RunContext(config, "fake", run_key, SHA)


def _run_and_ingest(ctx: RunContext, spec: ShardSpec) -> tuple[object, float]:
    start = time.monotonic()
    outcome = run_shard(spec, locks_dir=ctx.config.locks_dir, device_wait_s=5, telemetry_interval_s=0.05)
    outcome = ingest_shard(ctx, outcome)
    return outcome, time.monotonic() - start


def test_a_fifo_as_results_fails_the_shard_instead_of_hanging(
        tmp_path: Path, shard_spec: Callable[..., ShardSpec]) -> None:
    ctx = _ctx(tmp_path)
    spec = shard_spec("fifo", mode="fifo")  # results AND run_identity.json are FIFOs
    outcome, took = _run_and_ingest(ctx, spec)
    assert took < 20
    assert outcome.status is ShardStatus.FAILED  # type: ignore[attr-defined]
    assert "is a FIFO (named pipe), not a regular file" in outcome.error  # type: ignore[attr-defined]
    stored = open_store(ctx.config).shards(ctx.run_key)
    assert [(s.status, "FIFO" in (s.error or "")) for s in stored] == [(ShardStatus.FAILED, True)]


def test_a_symlink_out_of_the_shard_folder_is_refused(
        tmp_path: Path, shard_spec: Callable[..., ShardSpec]) -> None:
    ctx = _ctx(tmp_path)
    outcome, _ = _run_and_ingest(ctx, shard_spec("link", mode="symlink"))
    assert outcome.status is ShardStatus.FAILED  # type: ignore[attr-defined]
    assert "symlink leading out of the shard folder" in outcome.error  # type: ignore[attr-defined]
    assert open_store(ctx.config).results(ctx.run_key) == []  # nothing of the outside file stored


def test_a_symlink_inside_the_shard_folder_is_read(tmp_path: Path) -> None:
    shard = tmp_path / "shard"
    shard.mkdir()
    (shard / "real.json").write_text('{"schema_version": 1, "cases": [{"name": "a", "metric": "time", '
                                     '"unit": "ms", "samples": [1.0]}]}')
    (shard / "results.json").symlink_to(shard / "real.json")
    assert [r.case for r in parse_results("zlops-json", shard / "results.json", root=shard)] == ["a"]


def test_device_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="a character device, not a regular file"):
        parse_results("zlops-json", Path("/dev/zero"))


def test_an_oversized_results_file_fails_the_shard_with_the_key_to_raise(
        tmp_path: Path, shard_spec: Callable[..., ShardSpec]) -> None:
    ctx = _ctx(tmp_path, results_max_mib=0.01)
    spec = shard_spec("big", mode="big")
    outcome, _ = _run_and_ingest(ctx, spec)
    assert outcome.status is ShardStatus.FAILED  # type: ignore[attr-defined]
    assert "over the limit of 10485 bytes (results_max_mib" in outcome.error  # type: ignore[attr-defined]
    # the suite's own limit wins over the global one
    ctx2 = _ctx(tmp_path / "two", results_max_mib=0.01)
    suite = ctx2.config.suites["fake"].model_copy(update={"results_max_mib": 1.0})
    ctx2 = RunContext(ctx2.config.model_copy(update={"suites": {"fake": suite}}), "fake", ctx2.run_key,
                               SHA)
    assert ctx2.config.results_max_bytes("fake") == 1024 * 1024
    outcome, _ = _run_and_ingest(ctx2, shard_spec("big2", mode="big"))
    assert outcome.status is ShardStatus.OK  # type: ignore[attr-defined]


def test_parsing_is_bounded_in_time() -> None:
    start = time.monotonic()
    with pytest.raises(ParseError, match=r"parsing took longer than 0\.2 s"):
        _bounded(lambda: time.sleep(3) or [], 0.2, "slow.json")  # type: ignore[func-returns-value]
    assert time.monotonic() - start < 2
    with pytest.raises(ValueError, match="boom"):
        _bounded(lambda: (_ for _ in ()).throw(ValueError("boom")), 5, "x")


def _fill(mount: Path) -> None:
    try:
        with (mount / "filler").open("wb") as fh:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
    except OSError:
        pass


@pytest.fixture
def full_tmpfs(tmp_path: Path):
    """A full 256 KiB tmpfs mounted at ``mount_at(path)``; needs root (mount), skipped otherwise."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("disk-full tests mount a small tmpfs, which needs root (mount -t tmpfs)")
    mounted: list[Path] = []

    def mount_at(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)], capture_output=True,
                              text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs CAP_SYS_ADMIN): {done.stderr.strip()}")
        mounted.append(path)
        _fill(path)
        return path

    yield mount_at
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_fails_only_its_shard(tmp_path: Path, shard_spec: Callable[..., ShardSpec], probe: Path,
                                         full_tmpfs: Callable[[Path], Path]) -> None:
    ctx = _ctx(tmp_path)
    spec = shard_spec("full")
    full_tmpfs(spec.artifact_dir)
    outcome, _ = _run_and_ingest(ctx, spec)
    assert outcome.status is ShardStatus.FAILED  # type: ignore[attr-defined]
    assert outcome.error.startswith(f"no space left under {spec.artifact_dir}")  # type: ignore[attr-defined]
    # the next shard of the night, on a disk with room, is unaffected
    ok, _ = _run_and_ingest(ctx, shard_spec("room", device=1))
    assert ok.status is ShardStatus.OK  # type: ignore[attr-defined]
    assert overlaps(probe) == []
