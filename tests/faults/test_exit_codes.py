"""Exit codes say what happened: a night with failed shards is not a clean night."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from fake_upstream import Upstream, config_data

from zlops.cli import app as cli
from zlops.model import CompareSummary, ShardOutcome, ShardStatus


def _result(statuses: list[ShardStatus], *, incomparable: bool = False, regression: bool = False) -> object:
    shards = tuple(ShardOutcome(pool="p", device=i, backend="cpu", status=s, artifact_dir=Path("."), exit_code=None,
                                started_at=None, ended_at=None) for i, s in enumerate(statuses))
    counts = {"incomparable": incomparable, "regression": regression}

    class Summary(CompareSummary):
        def count(self, *verdicts: object) -> int:  # type: ignore[override]
            return sum(bool(counts.get(getattr(v, "value", ""), False)) for v in verdicts)

    return SimpleNamespace(shards=shards, ok=any(s is ShardStatus.OK for s in statuses),
                           summary=Summary("k", "s", "0" * 40, ()))


@pytest.mark.parametrize(("statuses", "kw", "code"), [
    ([ShardStatus.OK] * 3, {}, 0),
    ([ShardStatus.OK] + [ShardStatus.FAILED] * 8, {}, 5),
    ([ShardStatus.OK, ShardStatus.TIMEOUT], {}, 5),
    ([ShardStatus.OK, ShardStatus.SKIPPED], {}, 5),
    ([ShardStatus.FAILED] * 2, {}, 1),
    ([ShardStatus.OK, ShardStatus.FAILED], {"regression": True}, 3),
    ([ShardStatus.OK, ShardStatus.FAILED], {"incomparable": True, "regression": True}, 4),
])
def test_exit_code_of_a_night(statuses: list[ShardStatus], kw: dict[str, bool], code: int) -> None:
    assert cli.nightly_exit_code(_result(statuses, **kw), "regression") == code  # type: ignore[arg-type]


def test_the_worst_suite_decides_and_codes_are_documented(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli._worst([0, 5, 3]) == 3 and cli._worst([5, 0]) == 5 and cli._worst([0, 5, 1]) == 1
    with pytest.raises(SystemExit):
        cli.main(["nightly", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "5 a shard failed, timed out or was skipped" in text and "143 SIGTERM" in text
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "5 a shard failed" in readme


@pytest.mark.slow
def test_a_night_with_8_of_9_shards_failed_does_not_exit_0(tmp_path: Path) -> None:
    up = Upstream(tmp_path / "up")
    up.commit({"alpha": 1.0}, "first", behaviour={str(d): "crash" for d in range(1, 9)})
    data = config_data(tmp_path / "home", up.path, devices=tuple(range(9)))
    cfg = tmp_path / "zlops.yaml"
    cfg.write_text(yaml.safe_dump(data))
    assert cli.main(["--plain", "nightly", "--config", str(cfg), "--run-id", "n1"]) == cli.EXIT_SHARDS
