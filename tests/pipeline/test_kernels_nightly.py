"""Two nightlies through the CLI with ``kernels: triton``: the shards' kernels are stored and each alert
is attributed (real git upstream, real venv and benchmark processes, SQLite).

The fake benchmark "compiles" one Triton kernel per case into ``$TRITON_CACHE_DIR`` in Triton's
layout, its code taken from ``kernels/<case>.src`` in the repository. Night 2 changes alpha's kernel
source and makes alpha slower (a kernel change), and makes beta slower in the "Python wrapper" only
(its kernel source is untouched): alpha is attributed to alpha_kernel with both hashes, beta to
"no compiled kernel of this op changed".
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from fake_upstream import Upstream

from zlops.cli import main
from zlops.config import Config
from zlops.steps.context import open_store

pytestmark = pytest.mark.slow

KERNEL_WRITER = r'''
import base64, hashlib, json, os, pathlib
def compile_kernels():
    cache = os.environ.get("TRITON_CACHE_DIR")
    if not cache:
        return
    for src in sorted(pathlib.Path("kernels").glob("*.src")):
        name, code = src.stem + "_kernel", src.read_bytes()
        key = base64.b32encode(hashlib.sha256(name.encode() + code).digest()).decode().rstrip("=")
        folder = pathlib.Path(cache) / key
        folder.mkdir(parents=True, exist_ok=True)
        (folder / (name + ".cubin")).write_bytes(b"CUBIN" + code)
        (folder / (name + ".ptx")).write_bytes(b"PTX" + code)
        (folder / (name + ".json")).write_text(json.dumps({"hash": "x", "name": name, "num_warps": 4, "num_stages": 3,
                                                        "num_ctas": 1, "target": {"backend": "cuda", "arch": 90},
                                                        "triton_version": "3.6.0", "shared": 0}))
        (folder / ("__grp__" + name + ".json")).write_text(json.dumps({"child_paths": {}}))
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
    shas = [_commit(upstream, {"alpha": 1.0, "beta": 2.0}, {"alpha": "BLOCK=1024", "beta": "BLOCK=512"}, "n1"),
            _commit(upstream, {"alpha": 1.3, "beta": 2.6}, {"alpha": "BLOCK=2048", "beta": "BLOCK=512"},
                    "alpha: bigger block; beta: an extra host-side step")]
    data = make_config().model_dump(mode="json", exclude_none=True)
    data["suites"]["fake"]["kernels"] = "triton"
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
