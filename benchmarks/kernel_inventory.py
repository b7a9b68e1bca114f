"""What the kernel inventory costs a shard (issue 25), on the CPU, with a synthetic Triton cache.

Run:  python benchmarks/kernel_inventory.py [--kernels 100] [--kernel-kib 110] [--repeat 5] [--compile-ms 0]

1. ``parse``: :func:`zlops.kernels.triton.parse_cache` of a cache of ``--kernels`` kernels in Triton
   3.x's layout (8 files each; ``--kernel-kib`` per kernel: the real FlagGems capture on the H200 held
   ~1.1 MB for ~10 kernels), cold-ish (first pass) and warm (page cache), median of ``--repeat``.
2. ``shard``: :func:`zlops.run.runner.run_shard` of one benchmark process that "compiles" those kernels (and
   a launcher module) through Triton's cache protocol (tests/fake_triton, the calls Triton's compiler
   makes: ``get_group`` then ``put`` / ``put_group`` on a miss), spends ``--compile-ms`` of CPU per kernel
   it compiles, and sleeps ``--work-s``; in three variants side by side, their order rotated every
   repetition: ``no inventory`` (no ``kernels:``, a warm shared ``TRITON_CACHE_DIR``: what a suite
   without kernels reuses), ``inventory, empty cache`` (``kernels: triton``, the shard's own empty cache:
   everything compiled) and ``inventory, seeded`` (the same, seeded from an earlier shard's cache:
   zlops.kernels.seed, nothing compiled). Median wall time of each, the difference to the first, the
   seed's staging time and the parse time.

``--compile-ms 0`` measures what zlops itself adds (staging, the cache manager, the parse); a compile
cost (the H200's FlagGems kernels: 1-5 s for ~19, so ~50-250 ms each) shows what the seed saves.
Prints a markdown table and the load average at start and end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from triton_cache_factory import flaggems_like

from zlops.config.settings import SuiteConfig
from zlops.kernels.inventory import Inventory, read_inventory
from zlops.kernels.providers import TRITON_CACHE_NAME
from zlops.kernels.seed import SeedPlan
from zlops.kernels.triton import parse_cache
from zlops.run.runner import ShardSpec, run_shard

TESTS = Path(__file__).resolve().parents[1] / "tests"
FAKE_TRITON = TESTS / "fake_triton"
BENCH = '''
import json, sys, time
sys.path.insert(0, {tests!r})
from triton_cache_factory import FLAGGEMS_KERNELS, compile_like_triton, launcher_like_triton
compiled = 0
for i in range({n}):
    base = FLAGGEMS_KERNELS[i % len(FLAGGEMS_KERNELS)]
    if compile_like_triton(base if i < len(FLAGGEMS_KERNELS) else f"{{base}}_{{i}}", "v1", size={size}) == "compiled":
        compiled += 1
        end = time.perf_counter() + {compile_ms} / 1e3  # a compile's CPU time
        while time.perf_counter() < end:
            pass
launcher_like_triton("launcher v1")
print("COMPILED", compiled, flush=True)
time.sleep({work})
json.dump({{"schema_version": 1, "cases": [{{"name": "amax/f32", "metric": "latency", "unit": "ms",
           "lower_is_better": True, "samples": [1.0]}}]}}, open(sys.argv[1], "w"))
'''
VARIANTS = ("no inventory", "inventory, empty cache", "inventory, seeded")


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
    ap.add_argument("--compile-ms", type=float, default=0.0, help="CPU spent per kernel the process compiles")
    a = ap.parse_args()
    load0 = " ".join(f"{x:.2f}" for x in os.getloadavg())
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
        (wt / "bench.py").write_text(BENCH.format(tests=str(TESTS), n=a.kernels, size=size, work=a.work_s,
                                                  compile_ms=a.compile_ms))

        def shard(name: str, variant: str) -> tuple[float, Inventory | None]:
            kernels = None if variant == VARIANTS[0] else "triton"
            env = {"PYTHONPATH": str(FAKE_TRITON)}
            if kernels is None:
                env["TRITON_CACHE_DIR"] = str(tmp / "shared")  # warm, shared by every run (Triton's default)
            suite = SuiteConfig(repo=str(tmp), format="zlops-json", pools=["p"], env=env, kernels=kernels,
                                command=[sys.executable, "bench.py", "{results}"])
            seed = SeedPlan(run_key="prev", caches=(tmp / "art" / "prev" / TRITON_CACHE_NAME,)) \
                if variant == VARIANTS[2] else None
            spec = ShardSpec(run_key=name, suite_name="s", suite=suite, sha="0" * 40, pool="p", backend="cpu",
                             device=0, worktree=wt, venv=Path(sys.prefix), artifact_dir=tmp / "art" / name,
                             kernel_seed=seed)
            t0 = time.perf_counter()
            out = run_shard(spec, locks_dir=tmp / "locks", device_wait_s=5)
            wall = time.perf_counter() - t0
            assert out.status.value == "ok", out.error
            return wall, read_inventory(spec.artifact_dir)

        shard("prev", VARIANTS[1])     # the earlier night whose cache seeds the seeded variant
        shard("warm", VARIANTS[0])     # fills the shared cache
        walls: dict[str, list[float]] = {v: [] for v in VARIANTS}
        stage_s: list[float] = []
        parse_s: list[float] = []
        reuse: dict[str, str] = {}
        for i in range(a.repeat):
            for variant in VARIANTS[i % 3:] + VARIANTS[:i % 3]:
                wall, inv = shard(f"{i}-{VARIANTS.index(variant)}", variant)
                walls[variant].append(wall)
                if inv is not None:
                    reuse[variant] = inv.summary()
                    parse_s.append(inv.parse_s or 0.0)
                    if inv.seed is not None and inv.seed.stage_s is not None:
                        stage_s.append(inv.seed.stage_s)
    real = _real_parse(a.kernels, a.repeat)
    print(f"synthetic cache: {a.kernels} kernels, {files} files, {total / 1e6:.1f} MB; repeat {a.repeat}; "
          f"compile {a.compile_ms:g} ms a kernel (simulated); load average {load0} at start, "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at end\n")
    print("| measure | median | min |\n|---|---:|---:|")
    med, low = statistics.median(parse) * 1e3, min(parse) * 1e3
    print(f"| parse_cache ({a.kernels} kernels) | {med:.1f} ms | {low:.1f} ms |")
    print(f"| parse_cache, the real H200 cache copied to {real[0]} kernels (ELF cubins) | {real[1] * 1e3:.1f} ms "
          f"| {real[2] * 1e3:.1f} ms |")
    print(f"| staging the seed ({a.kernels} kernels, hard links) | {statistics.median(stage_s) * 1e3:.1f} ms "
          f"| {min(stage_s) * 1e3:.1f} ms |")
    print(f"| parse_cache after the shard (all variants) | {statistics.median(parse_s) * 1e3:.1f} ms "
          f"| {min(parse_s) * 1e3:.1f} ms |")
    base = statistics.median(walls[VARIANTS[0]])
    for variant in VARIANTS:
        w = statistics.median(walls[variant])
        diff = "" if variant == VARIANTS[0] else f" ({w - base:+.3f} s, {(w - base) / base * 100:+.1f}%)"
        print(f"| shard wall, {variant} | {w:.3f} s{diff} | {min(walls[variant]):.3f} s |")
    print()
    for variant, line in reuse.items():
        print(f"- {variant}: {line}")


if __name__ == "__main__":
    main()
