"""What the kernel inventory costs a shard (issue 25), on the CPU, with a synthetic Triton cache.

Run:  python benchmarks/kernel_inventory.py [--kernels 100] [--kernel-kib 110] [--repeat 5]

1. ``parse``: :func:`zlops.kernels.triton.parse_cache` of a cache of ``--kernels`` kernels in Triton
   3.x's layout (8 files each; ``--kernel-kib`` per kernel: the real FlagGems capture on the H200 held
   ~1.1 MB for ~10 kernels), cold-ish (first pass) and warm (page cache), median of ``--repeat``.
2. ``shard``: :func:`zlops.runner.run_shard` of one benchmark process that writes those kernels into
   ``$TRITON_CACHE_DIR`` (as Triton would) and sleeps ``--work-s``, with ``kernels: triton`` and without,
   interleaved, median wall time of each and the difference.

Prints a markdown table.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from triton_cache_factory import flaggems_like

from zlops.config import SuiteConfig
from zlops.kernels.triton import parse_cache
from zlops.runner import ShardSpec, run_shard

TESTS = Path(__file__).resolve().parents[1] / "tests"
BENCH = '''
import json, os, sys, time, pathlib
sys.path.insert(0, {tests!r})
from triton_cache_factory import flaggems_like
cache = os.environ.get("TRITON_CACHE_DIR") or {fallback!r}
flaggems_like(pathlib.Path(cache), {n}, size={size})
time.sleep({work})
json.dump({{"schema_version": 1, "cases": [{{"name": "amax/f32", "metric": "latency", "unit": "ms",
           "lower_is_better": True, "samples": [1.0]}}]}}, open(sys.argv[1], "w"))
'''


def _real_parse(kernels: int, repeat: int) -> tuple[int, float, float]:
    """parse_cache of tests/data/triton_cache_h200 (19 kernels, real cubins) copied until ``kernels``."""
    import tarfile

    with tempfile.TemporaryDirectory(prefix="zlops-kinv-real-") as tmp_s:
        tmp = Path(tmp_s)
        with tarfile.open(TESTS / "data" / "triton_cache_h200" / "cache.tgz") as tar:
            tar.extractall(tmp / "x", filter="data")
        src = [d for d in (tmp / "x" / "cache").iterdir() if any(d.glob("__grp__*.json"))]
        n = 0
        while n < kernels:
            for d in src[: kernels - n]:
                shutil.copytree(d, tmp / "cache" / f"{d.name}{n}")
                n += 1
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            inv = parse_cache(tmp / "cache")
            times.append(time.perf_counter() - t0)
        return len(inv.kernels), statistics.median(times), min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=100)
    ap.add_argument("--kernel-kib", type=float, default=110.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work-s", type=float, default=2.0)
    a = ap.parse_args()
    size = int(a.kernel_kib * 1024 / 7)  # seven stage/binary files of this size per kernel, plus metadata
    with tempfile.TemporaryDirectory(prefix="zlops-kinv-") as tmp_s:
        tmp = Path(tmp_s)
        flaggems_like(tmp / "cache", a.kernels, size=size)
        total = sum(p.stat().st_size for p in (tmp / "cache").rglob("*") if p.is_file())
        files = sum(1 for p in (tmp / "cache").rglob("*") if p.is_file())
        parse = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            inv = parse_cache(tmp / "cache")
            parse.append(time.perf_counter() - t0)
        assert len(inv.kernels) == a.kernels
        wt = tmp / "wt"
        wt.mkdir()
        (wt / "bench.py").write_text(BENCH.format(tests=str(TESTS), fallback=str(tmp / "shared"), n=a.kernels,
                                                  size=size, work=a.work_s))
        walls: dict[str, list[float]] = {"with": [], "without": []}
        for i in range(a.repeat):
            for mode in ("with", "without") if i % 2 == 0 else ("without", "with"):
                shutil.rmtree(tmp / "shared", ignore_errors=True)
                suite = SuiteConfig(repo=str(tmp), format="zlops-json", pools=["p"], command=[
                    sys.executable, "bench.py", "{results}"], kernels="triton" if mode == "with" else None)
                spec = ShardSpec(run_key=f"r{i}{mode}", suite_name="s", suite=suite, sha="0" * 40, pool="p",
                                 backend="cpu", device=0, worktree=wt, venv=Path(sys.prefix),
                                 artifact_dir=tmp / "art" / f"{i}-{mode}")
                t0 = time.perf_counter()
                out = run_shard(spec, locks_dir=tmp / "locks", device_wait_s=5)
                walls[mode].append(time.perf_counter() - t0)
                assert out.status.value == "ok", out.error
    real = _real_parse(a.kernels, a.repeat)
    w, wo = statistics.median(walls["with"]), statistics.median(walls["without"])
    print(f"synthetic cache: {a.kernels} kernels, {files} files, {total / 1e6:.1f} MB; repeat {a.repeat}\n")
    print("| measure | median | min |\n|---|---:|---:|")
    med, low = statistics.median(parse) * 1e3, min(parse) * 1e3
    print(f"| parse_cache ({a.kernels} kernels) | {med:.1f} ms | {low:.1f} ms |")
    print(f"| parse_cache, the real H200 cache copied to {real[0]} kernels (ELF cubins) | {real[1] * 1e3:.1f} ms "
          f"| {real[2] * 1e3:.1f} ms |")
    print(f"| shard wall, kernels: triton | {w:.3f} s | {min(walls['with']):.3f} s |")
    print(f"| shard wall, no kernels | {wo:.3f} s | {min(walls['without']):.3f} s |")
    print(f"| difference | {w - wo:+.3f} s ({(w - wo) / wo * 100:+.1f}%) | |")


if __name__ == "__main__":
    main()
