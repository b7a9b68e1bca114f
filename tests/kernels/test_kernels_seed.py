"""The seeded kernel cache (zlops.kernels.seed): a nightly shard's own Triton cache is seeded from the
earlier night's, so an unchanged kernel is taken, not compiled, while the inventory still lists only
the kernels the process used and attribution still compares compiled code.

The benchmark processes go through Triton's cache protocol (tests/triton_cache_factory.compile_like_triton:
the compiler's get_group / put / put_group, the launcher build's get_file / put) with zlops' cache manager
(zlops/kernels/seedhook) on top of tests/fake_triton, and of the real ``triton`` package where this host
has it (importable, or a folder with it in ``ZLOPS_TEST_TRITON_SITE``: ``pip install --target DIR triton``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest
from triton_cache_factory import write_autotune, write_kernel

from zlops.config.settings import SuiteConfig
from zlops.kernels import seed as seeding
from zlops.kernels.attribution import KERNEL_CHANGED, OUTSIDE, attribute
from zlops.kernels.inventory import INVENTORY_FILE, Inventory, read_inventory
from zlops.kernels.seed import SeedPlan, stage
from zlops.kernels.triton import parse_cache
from zlops.model import ShardStatus
from zlops.run.runner import ShardSpec, read_manifest, run_shard

SHA = "0123456789abcdef0123456789abcdef01234567"
TESTS = Path(__file__).resolve().parents[1]
H200 = TESTS / "data" / "triton_cache_h200" / "cache.tgz"

BENCH = f'''
import json, sys
sys.path.insert(0, {str(TESTS)!r})
from triton_cache_factory import compile_like_triton, launcher_like_triton
import triton
from triton.runtime.cache import get_cache_manager
print("TRITON", triton.__version__, type(get_cache_manager("00" * 32)).__name__, flush=True)
import os
print("PYTHONPATH", os.environ.get("PYTHONPATH"), flush=True)
for name, source in json.load(open(sys.argv[2])):
    print("KERNEL", name, compile_like_triton(name, source), flush=True)
print("LAUNCHER", launcher_like_triton("launcher v1"), flush=True)
json.dump({{"schema_version": 1, "cases": [{{"name": "amax/f16", "metric": "latency", "unit": "ms",
           "lower_is_better": True, "samples": [1.0, 1.1]}}]}}, open(sys.argv[1], "w"))
'''


def _real_triton_site() -> str | None:
    site = os.environ.get("ZLOPS_TEST_TRITON_SITE")
    if site and (Path(site) / "triton" / "runtime" / "cache.py").is_file():
        return site
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.origin and (Path(spec.origin).parent / "runtime" / "cache.py").is_file():
        version = (Path(spec.origin).parent / "__init__.py").read_text(errors="replace")
        return None if "+fake" in version else str(Path(spec.origin).parents[1])
    return None


REAL = _real_triton_site()
TRITONS = [pytest.param(str(TESTS / "fake_triton"), id="fake-triton"),
           pytest.param(REAL, id="real-triton", marks=pytest.mark.skipif(
               REAL is None, reason="no real triton here (ZLOPS_TEST_TRITON_SITE=DIR with pip install --target DIR "
                                   "triton runs it)"))]


def _night(tmp: Path, n: int, kernels: list[tuple[str, str]], triton: str, *,
           seed: SeedPlan | None = None) -> tuple[ShardSpec, Inventory, str]:
    """Night ``n``'s shard: a process that compiles ``kernels`` (name, source) through Triton's cache."""
    wt = tmp / "wt"
    wt.mkdir(exist_ok=True)
    (wt / "bench.py").write_text(BENCH)
    (wt / f"kernels{n}.json").write_text(json.dumps(kernels))
    suite = SuiteConfig(repo=str(tmp), format="zlops-json", pools=["p"], kernels="triton",
                        env={"PYTHONPATH": triton}, command=["python", "bench.py", "{results}", f"kernels{n}.json"])
    spec = ShardSpec(run_key=f"n{n}", suite_name="s", suite=suite, sha=SHA, pool="p", backend="cpu", device=0,
                     worktree=wt, venv=Path(sys.prefix), artifact_dir=tmp / f"n{n}" / "p" / "0", kernel_seed=seed)
    out = run_shard(spec, locks_dir=tmp / "locks", device_wait_s=0, telemetry_interval_s=0.05)
    log = (spec.artifact_dir / "run.log").read_text()
    assert out.status is ShardStatus.OK, log
    inv = read_inventory(spec.artifact_dir)
    assert inv is not None and inv.state == "ok"
    return spec, inv, log


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*")
            if p.is_file()}


def _from(tmp: Path, n: int, **limits: int) -> SeedPlan:
    return SeedPlan(run_key=f"n{n}", caches=(tmp / f"n{n}" / "p" / "0" / "triton_cache",), **limits)


@pytest.mark.parametrize("triton", TRITONS)
def test_unchanged_kernels_are_taken_from_the_seed_changed_ones_compiled(tmp_path: Path, triton: str) -> None:
    first, inv1, log1 = _night(tmp_path, 1, [("amax_kernel", "v1"), ("fill_kernel", "v1"), ("gone_kernel", "v1")],
                               triton, seed=SeedPlan(reason="no earlier accepted night"))
    # the first night: nothing to seed from, as before (no cache manager, everything compiled here)
    version = "3.6.0+fake" if triton.endswith("fake_triton") else "3.6.0"
    assert f"TRITON {version} FileCacheManager" in log1
    assert "KERNEL amax_kernel compiled" in log1 and "LAUNCHER built" in log1
    assert {k.name: k.reuse for k in inv1.kernels} == {"amax_kernel": "compiled", "fill_kernel": "compiled",
                                                        "gone_kernel": "compiled"}
    assert "TRITON_CACHE_MANAGER" not in read_manifest(first.artifact_dir)["env_added"]  # type: ignore[index]
    assert inv1.summary() == "triton: 3 kernels (3 compiled here, 0 reused); no seed: no earlier accepted night"
    night1_files = _files(first.artifact_dir / "triton_cache")

    # night 2: fill_kernel's source changed, gone_kernel was removed upstream, new_kernel appeared
    second, inv2, log2 = _night(tmp_path, 2, [("amax_kernel", "v1"), ("fill_kernel", "v2"), ("new_kernel", "v1")],
                                triton, seed=_from(tmp_path, 1))
    assert f"TRITON {version} SeedingCacheManager" in log2  # zlops' manager, resolved by Triton itself
    assert "KERNEL amax_kernel hit" in log2 and "LAUNCHER hit" in log2  # taken from the seed, not compiled
    assert "KERNEL fill_kernel compiled" in log2 and "KERNEL new_kernel compiled" in log2
    assert {k.name: k.reuse for k in inv2.kernels} == {"amax_kernel": "reused (seeded from n1)",
                                                        "fill_kernel": "compiled", "new_kernel": "compiled"}
    assert "gone_kernel" not in {k.name for k in inv2.kernels}  # in the seed, never used tonight: not listed
    assert inv2.seed is not None and (inv2.seed.offered, inv2.seed.launchers, inv2.seeded) == (3, 1, 1)
    assert inv2.seed.run_key == "n1" and inv2.seed.sources == (str(first.artifact_dir / "triton_cache"),)
    assert inv2.seed.linked is True  # the same file system: hard links
    assert inv2.summary() == "triton: 3 kernels (2 compiled here, 1 reused, 1 seeded from n1: 1 of 3 offered)"
    manifest = read_manifest(second.artifact_dir)
    assert manifest is not None and manifest["kernels"] == inv2.summary()
    assert manifest["env_added"]["TRITON_CACHE_MANAGER"] == seeding.MANAGER
    assert manifest["env_added"]["PYTHONPATH"] == "***"  # built on the suite's own value: as private as it
    assert f"{seeding.HOOK_DIR}{os.pathsep}{triton}" in log2  # the benchmark printed its sys.path
    assert not (second.artifact_dir / seeding.SEED_DIR_NAME).exists()  # the staged seed is gone after the shard
    amax1, amax2 = (next(k for k in i.kernels if k.name == "amax_kernel") for i in (inv1, inv2))
    assert (amax1.cache_key, amax1.code_hash) == (amax2.cache_key, amax2.code_hash)
    # the group file names tonight's files, not the seed's (Triton's group holds absolute paths)
    group = json.loads((second.artifact_dir / "triton_cache" / amax2.cache_key / "__grp__amax_kernel.json")
                       .read_text())["child_paths"]
    assert all(p.startswith(str(second.artifact_dir / "triton_cache")) for p in group.values())

    # attribution still compares compiled code by hash: fill changed, amax did not
    fill1, fill2 = (next(k for k in i.kernels if k.name == "fill_kernel") for i in (inv1, inv2))
    changed = attribute(inv1, inv2, "fill")
    assert changed.kind == KERNEL_CHANGED and changed.text == (
        f"kernel code changed: fill_kernel (compiled code {fill1.code_hash[:8]}.. -> {fill2.code_hash[:8]}..)")
    assert attribute(inv1, inv2, "amax").kind == OUTSIDE

    # night 3 seeds from night 2's cache (its seeded folders included): the mark names night 2
    _, inv3, log3 = _night(tmp_path, 3, [("amax_kernel", "v1"), ("fill_kernel", "v2")], triton,
                           seed=_from(tmp_path, 2))
    assert "compiled" not in log3
    assert {k.name: k.reuse for k in inv3.kernels} == {"amax_kernel": "reused (seeded from n2)",
                                                        "fill_kernel": "reused (seeded from n2)"}
    # the earlier night's cache is untouched by the nights seeded from it
    assert _files(first.artifact_dir / "triton_cache") == night1_files
    assert parse_cache(first.artifact_dir / "triton_cache").kernels == tuple(
        replace(k, compiled=None) for k in inv1.kernels)


def test_size_and_count_bounds_leave_the_rest_to_be_compiled(tmp_path: Path) -> None:
    fake = str(TESTS / "fake_triton")
    names = [(f"k{i}_kernel", "v1") for i in range(6)]
    _night(tmp_path, 1, names, fake)
    per_kernel = sum(p.stat().st_size for p in next((tmp_path / "n1" / "p" / "0" / "triton_cache").glob(
        "*/__grp__k0_kernel.json")).parent.iterdir() if p.is_file())
    _, inv, _ = _night(tmp_path, 2, names, fake, seed=_from(tmp_path, 1, max_bytes=int(per_kernel * 2.5)))
    assert inv.seed is not None and inv.seed.offered == 2 and inv.seed.skipped["over_bound"] >= 4
    assert inv.seed.bytes <= per_kernel * 2.5
    assert sorted(k.compiled for k in inv.kernels) == [False, False, True, True, True, True]
    _, inv, _ = _night(tmp_path, 3, names, fake, seed=_from(tmp_path, 1, max_folders=3))
    assert inv.seed is not None and inv.seed.offered + inv.seed.launchers == 3
    assert inv.seeded == inv.seed.offered and len(inv.kernels) == 6


def test_a_partial_or_corrupt_seed_folder_is_skipped_and_compiled_again(tmp_path: Path) -> None:
    fake = str(TESTS / "fake_triton")
    kernels = [("amax_kernel", "v1"), ("fill_kernel", "v1"), ("sum_kernel", "v1")]
    first, inv1, _ = _night(tmp_path, 1, kernels, fake)
    cache = first.artifact_dir / "triton_cache"
    by_name = {k.name: cache / k.cache_key for k in inv1.kernels}
    (by_name["fill_kernel"] / "fill_kernel.cubin").unlink()                 # a compile cut off
    (by_name["sum_kernel"] / "__grp__sum_kernel.json").write_text("{not json")  # a torn group file
    _, inv2, log2 = _night(tmp_path, 2, kernels, fake, seed=_from(tmp_path, 1))
    assert inv2.seed is not None and inv2.seed.offered == 1 and inv2.seed.skipped == {"incomplete": 2}
    assert "KERNEL fill_kernel compiled" in log2 and "KERNEL sum_kernel compiled" in log2
    assert {k.name: k.reuse for k in inv2.kernels} == {"amax_kernel": "reused (seeded from n1)",
                                                        "fill_kernel": "compiled", "sum_kernel": "compiled"}


def test_a_seed_that_is_not_there_or_a_suite_with_its_own_manager_runs_as_before(tmp_path: Path) -> None:
    fake = str(TESTS / "fake_triton")
    _, inv, log = _night(tmp_path, 1, [("amax_kernel", "v1")], fake,
                         seed=SeedPlan(run_key="n0", caches=(tmp_path / "elsewhere" / "triton_cache",)))
    assert "KERNEL amax_kernel compiled" in log and inv.seed is not None and inv.seed.offered == 0
    assert inv.seed.reason.startswith("the caches of n0 are not on this host")
    assert inv.summary().endswith("; no seed: " + inv.seed.reason)
    from zlops.kernels.providers import TritonProvider

    prepared = TritonProvider().prepare(tmp_path / "s" / "triton_cache", seed=_from(tmp_path, 1),
                                        suite_env={"TRITON_CACHE_MANAGER": "mine:Manager"})
    assert "TRITON_CACHE_MANAGER" not in prepared.env and prepared.seed is not None
    assert prepared.seed.reason == "the suite's env sets its own TRITON_CACHE_MANAGER"


def test_stage_takes_only_complete_folders_never_through_a_symlink(tmp_path: Path) -> None:
    src = tmp_path / "src"
    good = write_kernel(src, "amax_kernel", size=500)
    no_group = write_kernel(src, "fill_kernel", size=500, group=False)   # metadata but no group: cut off
    linked = write_kernel(src, "sum_kernel", size=500)
    (linked / "sum_kernel.cubin").unlink()
    (linked / "sum_kernel.cubin").symlink_to(good / "amax_kernel.cubin")   # a file through a symlink
    (src / "ZZLINK").symlink_to(good, target_is_directory=True)           # a folder through a symlink
    write_autotune(src, "mm_kernel", [1024], [({"BLOCK": 64}, 0.1)])      # tonight's autotuner measures anew
    (src / "LAUNCHER").mkdir()
    (src / "LAUNCHER" / "__triton_launcher.cpython-312-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (good / "tmp.pid_1_x").mkdir()                                         # a put's leftover: not part of it
    info = stage(SeedPlan(run_key="n1", caches=(src,)), tmp_path / "staged")
    assert (info.offered, info.launchers) == (1, 1)
    assert info.skipped == {"autotune": 1, "incomplete": 1, "symlink": 2}
    staged = tmp_path / "staged" / good.name
    assert sorted(p.name for p in staged.iterdir()) == sorted([*(p.name for p in good.iterdir() if p.is_file()),
                                                               seeding.MARK])
    assert json.loads((staged / seeding.MARK).read_text()) == {"run_key": "n1", "source": str(src)}
    assert (staged / "amax_kernel.cubin").stat().st_ino == (good / "amax_kernel.cubin").stat().st_ino
    assert not (tmp_path / "staged" / no_group.name).exists() and not (tmp_path / "staged" / "ZZLINK").exists()


def test_the_real_h200_cache_stages_whole(tmp_path: Path) -> None:
    with tarfile.open(H200) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    info = stage(SeedPlan(run_key="n1", caches=(tmp_path / "x" / "cache",)), tmp_path / "staged")
    assert (info.offered, info.launchers, info.skipped) == (19, 11, {})
    assert info.bytes == sum(p.stat().st_size for p in (tmp_path / "x" / "cache").rglob("*") if p.is_file())
    # a folder taken from it reads as the same kernel, seeded (what the cache manager puts in the cache)
    inv = parse_cache(tmp_path / "staged")
    assert len(inv.kernels) == 19 and {k.seeded_from for k in inv.kernels} == {"n1"}
    assert [k.code_hash for k in inv.kernels] == [k.code_hash for k in parse_cache(tmp_path / "x" / "cache").kernels]


def test_a_kernel_compiled_again_after_it_was_taken_is_compiled(tmp_path: Path) -> None:
    import time

    folder = write_kernel(tmp_path / "cache", "amax_kernel", mtime=time.time() - 3600)
    (folder / seeding.MARK).write_text(json.dumps({"run_key": "n1"}))
    os.utime(folder / seeding.MARK, (time.time() - 1800, time.time() - 1800))
    start = time.time()
    assert parse_cache(tmp_path / "cache", started_at=start).kernels[0].reuse == "reused (seeded from n1)"
    (folder / "amax_kernel.json").write_text((folder / "amax_kernel.json").read_text())  # Triton wrote it again
    assert parse_cache(tmp_path / "cache", started_at=start).kernels[0].reuse == "compiled"


def test_the_hook_agrees_with_zlops_and_stays_standalone() -> None:
    text = (seeding.HOOK_DIR / f"{seeding.HOOK_MODULE}.py").read_text()
    assert f'MARK = "{seeding.MARK}"' in text and f'SEED_ENV = "{seeding.SEED_ENV}"' in text
    assert "class SeedingCacheManager(FileCacheManager)" in text and seeding.MANAGER.endswith(":SeedingCacheManager")
    imports = [line for line in text.splitlines() if line.startswith(("import ", "from "))]
    assert imports == ["from __future__ import annotations", "import json", "import os", "import shutil",
                       "import stat", "import uuid", "from triton.runtime.cache import FileCacheManager"]
    assert sorted(p.name for p in seeding.HOOK_DIR.iterdir() if p.suffix == ".py") == [f"{seeding.HOOK_MODULE}.py"]


def test_a_version_1_inventory_reads_as_unseeded(tmp_path: Path) -> None:
    write_kernel(tmp_path / "c", "amax_kernel")
    data = parse_cache(tmp_path / "c").to_dict()
    data["schema_version"] = 1
    del data["seed"]
    for k in data["kernels"]:
        del k["seeded_from"]
    (tmp_path / INVENTORY_FILE).write_text(json.dumps(data))
    inv = read_inventory(tmp_path)
    assert inv is not None and inv.seed is None and inv.kernels[0].seeded_from is None


def test_across_file_systems_the_seed_is_copied_and_still_read_as_seeded(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from zlops.kernels.providers import TritonProvider

    fake = str(TESTS / "fake_triton")
    _, inv1, _ = _night(tmp_path, 1, [("amax_kernel", "v1")], fake)

    def no_link(*args: object, **kwargs: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    with monkeypatch.context() as m:
        m.setattr(seeding.os, "link", no_link)
        prepared = TritonProvider().prepare(tmp_path / "n2" / "triton_cache", seed=_from(tmp_path, 1),
                                            suite_env={"PYTHONPATH": fake})
    assert prepared.seed is not None and prepared.seed.linked is False and prepared.seed.offered == 1
    script = (f"import os, sys\nsys.path.insert(0, {str(TESTS)!r})\n"
              "def no_link(*a, **k):\n    raise OSError(18, 'Invalid cross-device link')\n"
              "os.link = no_link\nfrom triton_cache_factory import compile_like_triton\n"
              "print(compile_like_triton('amax_kernel', 'v1'))\n")
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, **prepared.env}, capture_output=True,
                          text=True, check=True)
    assert done.stdout.split() == ["hit"], done.stderr
    inv = TritonProvider().collect(prepared, max_kernels=10)
    (k,) = inv.kernels
    assert k.reuse == "reused (seeded from n1)" and k.code_hash == inv1.kernels[0].code_hash
    assert (tmp_path / "n2" / "triton_cache" / k.cache_key / "amax_kernel.cubin").stat().st_nlink == 1  # copies
