"""Two nightlies through the CLI with ``kernels: triton``: the shards' kernels are stored and each alert
is attributed (real git upstream, real venv and benchmark processes, SQLite).

The fake benchmark "compiles" one Triton kernel per ``kernels/<name>.src`` of the repository through
Triton's cache protocol (tests/fake_triton) into ``$TRITON_CACHE_DIR``. Night 2 changes alpha's kernel
source and makes alpha slower (a kernel change), makes beta slower in the "Python wrapper" only (its
kernel source is untouched), and removes gamma's kernel: alpha is attributed to alpha_kernel with both
hashes, beta to "no compiled kernel of this op changed". Measured alone, night 2's shard seeds its
cache from night 1's (zlops.kernels.seed): beta_kernel is taken from it, alpha_kernel compiled anew, and
gamma_kernel, in the seed but not used, is not one of night 2's kernels.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from fake_upstream import Upstream

from zlops.cli import main
from zlops.config.settings import Config
from zlops.kernels.inventory import read_inventory
from zlops.steps.context import open_store

pytestmark = pytest.mark.slow
FAKE_TRITON = Path(__file__).resolve().parents[1] / "fake_triton"

KERNEL_WRITER = r'''
import hashlib, json, os, pathlib
def compile_kernels():
    if not os.environ.get("TRITON_CACHE_DIR"):
        return
    from triton.runtime.cache import get_cache_manager  # tests/fake_triton: Triton's cache protocol
    for src in sorted(pathlib.Path("kernels").glob("*.src")):
        name, code = src.stem + "_kernel", src.read_bytes()
        cache = get_cache_manager(hashlib.sha256(name.encode() + code).hexdigest())
        if (cache.get_group(name + ".json") or {}).get(name + ".json"):
            print("KERNEL", name, "hit")
            continue
        paths = {name + ".cubin": cache.put(b"CUBIN" + code, name + ".cubin"),
                 name + ".ptx": cache.put(b"PTX" + code, name + ".ptx")}
        paths[name + ".json"] = cache.put(json.dumps({
            "hash": "x", "name": name, "num_warps": 4, "num_stages": 3, "num_ctas": 1,
            "target": {"backend": "cuda", "arch": 90}, "triton_version": "3.6.0", "shared": 0}), name + ".json")
        cache.put_group(name + ".json", paths)
        print("KERNEL", name, "compiled")
compile_kernels()
'''


def _commit(upstream: Upstream, timings: dict[str, float], sources: dict[str, str], message: str) -> str:
    (upstream.path / "kernels").mkdir(exist_ok=True)
    for case, text in sources.items():
        (upstream.path / "kernels" / f"{case}.src").write_text(text)
    return upstream.commit(timings, message)


@pytest.mark.parametrize("measure", ["nightly", "paired"])
def test_alerts_are_attributed_to_the_kernel_or_to_nothing(upstream: Upstream, make_config: Callable[..., Config],
                                                            tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            measure: str) -> None:
    bench = upstream.path / "bench.py"
    bench.write_text(bench.read_text().replace("import fakeops", KERNEL_WRITER + "\nimport fakeops", 1))
    shas = [_commit(upstream, {"alpha": 1.0, "beta": 2.0},
                    {"alpha": "BLOCK=1024", "beta": "BLOCK=512", "gamma": "BLOCK=256"}, "n1")]
    (upstream.path / "kernels" / "gamma.src").unlink()
    shas.append(_commit(upstream, {"alpha": 1.3, "beta": 2.6}, {"alpha": "BLOCK=2048", "beta": "BLOCK=512"},
                        "alpha: bigger block; beta: an extra host-side step; gamma: removed"))
    data = make_config().model_dump(mode="json", exclude_none=True)
    data["suites"]["fake"]["kernels"] = "triton"
    data["suites"]["fake"].setdefault("env", {})["PYTHONPATH"] = str(FAKE_TRITON)
    data["pools"]["local"]["measure"] = measure  # paired: tonight's kernels are the first head run's
    cfg_path = tmp_path / "zlops.yaml"
    cfg_path.write_text(yaml.safe_dump(data), encoding="utf-8")
    for n, sha in enumerate(shas, 1):
        assert main(["--plain", "nightly", "--config", str(cfg_path), "--suite", "fake", "--sha", sha,
                     "--run-id", f"n{n}"]) == 0
    store = open_store(make_config())
    assert store.get_run("nightly:fake:n2").meta.get("paired/local/0") is not None or measure == "nightly"
    inv = store.pool_inventory("nightly:fake:n2", "local")
    assert inv is not None and [sorted(k.name for k in i.kernels) for i in inv.inventories] == [
        ["alpha_kernel", "beta_kernel"]]
    if measure == "nightly":  # a night measured alone seeds its shard's cache from the earlier night's
        (shard,) = (o.artifact_dir for o in store.shards("nightly:fake:n2"))
        tonight = read_inventory(shard)
        assert tonight is not None and {k.name: k.reuse for k in tonight.kernels} == {
            "alpha_kernel": "compiled", "beta_kernel": "reused (seeded from nightly:fake:n1)"}
        assert tonight.seed is not None and (tonight.seed.offered, tonight.seeded) == (3, 1)
        assert "KERNEL beta_kernel hit" in (shard / "run.log").read_text()
        assert {k.name: k.compiled for k in inv.inventories[0].kernels} == {"alpha_kernel": True, "beta_kernel": False}
    alerts = {a.case: a for a in store.alerts(suite="fake")}
    assert set(alerts) == {"alpha", "beta"}
    capsys.readouterr()
    old = hashlib.sha256(b"CUBINBLOCK=1024").hexdigest()[:8]
    new = hashlib.sha256(b"CUBINBLOCK=2048").hexdigest()[:8]
    assert main(["alert", "show", str(alerts["alpha"].id), "--config", str(cfg_path)]) == 0
    assert f"  kernels: kernel code changed: alpha_kernel (compiled code {old}.. -> {new}..)" in capsys.readouterr().out
    assert main(["alert", "show", str(alerts["beta"].id), "--config", str(cfg_path)]) == 0
    assert ("  kernels: no compiled kernel of this op changed (1 kernel(s): beta_kernel): the change is outside "
            "the kernels (launch path, Python, environment)") in capsys.readouterr().out


def test_every_ab_run_takes_its_kernels_from_the_nights_caches(upstream: Upstream,
                                                                make_config: Callable[..., Config],
                                                                tmp_path: Path) -> None:
    """An A/B's runs are seeded like a nightly shard (zlops.steps.seeding.side_seed_plan): the head's from
    tonight's shard cache, the base's unchanged kernels from it too and its changed one from the earlier
    night's. Before, each side's first run compiled every kernel (on the H200: FlagGems min, argmin and
    div_tensor's first pair took 50.2 and 55.2 s, the runs after it 23.1-29.1 s, the estimate 25.1 s)."""
    from zlops.steps.nightly import run_nightly

    bench = upstream.path / "bench.py"
    bench.write_text(bench.read_text().replace("import fakeops", KERNEL_WRITER + "\nimport fakeops", 1))
    n1 = _commit(upstream, {"alpha": 1.0, "beta": 2.0}, {"alpha": "BLOCK=1024", "beta": "BLOCK=512"}, "n1")
    n2 = _commit(upstream, {"alpha": 1.3, "beta": 2.0}, {"alpha": "BLOCK=2048", "beta": "BLOCK=512"},
                 "alpha: bigger block, slower")
    data = make_config().model_dump(mode="json", exclude_none=True)
    data["suites"]["fake"]["kernels"] = "triton"
    data["suites"]["fake"].setdefault("env", {})["PYTHONPATH"] = str(FAKE_TRITON)
    data["judge"] = "noise"
    data.setdefault("noise", {}).update({"ab_pairs": 7, "ab_budget_s": 600})
    from zlops.config.settings import parse_config

    config = parse_config(data)
    run_nightly(config, "fake", sha=n1, run_label="n1")
    night = run_nightly(config, "fake", sha=n2, run_label="n2")
    runs = sorted((night.report.markdown.parent / "ab" / "local").iterdir())
    assert len(runs) >= 10, [p.name for p in runs]
    for run in runs:   # every run of both sides, the first ones included: nothing compiled
        log = (run / "run.log").read_text()
        assert "compiled" not in log and log.count(" hit") == 2, (run.name, log)
    alpha = {c.case: c for c in night.summary.comparisons}["alpha"]
    assert "A/B" in alpha.judgement.note, alpha.judgement.note
