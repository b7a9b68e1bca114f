"""The third hold-out's nine live nights as a replay record: every benchmark process zlops ran, made small and text.

    python benchmarks/h200/holdout3_live_record.py tests/data/flaggems_h200/holdout3_2026-12-02/live

Reads the live record's ``state/home_v3a_after_night9.tar.gz`` (zlops' home after night 9: store, artifacts of
every night and A/B run, the mirror it fetched the nights from) and checks ``state/home_v3a_after_night4.tar.gz``
against it (night 4's home must hold the same files for nights 1-4). Writes into the same folder, for
tests/flaggems_holdout.py's ``HOLDOUT3`` (the stand-in serves these processes to the real ``zlops nightly``):

- ``processes.tsv``: one row per benchmark process (9 nightly shards, every A/B run), in start order, the columns
  of hold-out 2's (benchmarks/h200/holdout2_live_record.py, whose functions this uses) with ``label`` the code the
  process ran (``A`` for A and the README-only D1..D4, ``W`` for W3), ``commit`` the commit's own name, ``pytest_s``
  (pytest's own "N passed in X s": the tests' session, start-up before it excluded) and ``lease`` (the device lease
  the night ran on, PROVENANCE.md's table: s1 nights 1-4, 1 nights 5-6, 2 night 7, 3 nights 8-9);
- ``procs/<seq>_n<night>_<night|abNN{A,B}>_<commit>.{log,kernels.json}``: the process's ``flaggems_record.log``
  and ``kernels.json``, GPU identifiers scrubbed (manifests are left out: the replay reads neither them nor the
  telemetry; the home tarball keeps both);
- ``triton_cache/<label>/<cache key>/``: for every kernel any process of the label had, the real cache folder's
  ``<kernel>.json`` and ``.cubin`` (what ``zlops.kernels.triton.parse_cache`` reads), from the first nightly shard
  that had it, then the A/B runs' shared caches; a folder identical to one kept under another label is not kept
  twice (W's 19 are A's: W compiles nothing new), the stand-in looks a key up under any label;
- ``upstream/``: ``src/flag_gems/ops/argmax.py`` of A (``argmax_A.py``) and of W (``argmax_W.py``), ``W.diff``
  (D4..W, the only change of the nights' code) and ``log.txt`` (sha, tree, subject), from the home's
  ``mirrors/flaggems.git``. The mirror holds W3 as the nights ran it, cherry-picked onto D4 (``cf7069e``); its
  argmax.py is the bundle's ``w144`` (``49a1c98``) file (the script checks: ``holdout_patches/v3_W_argmax_wrapper.py
  144`` on A's argmax.py gives the same blob).
"""

from __future__ import annotations

import filecmp
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import holdout2_live_record as rec  # noqa: E402  (a sibling script, not a package)

LEASE = {"1": "s1", "2": "s1", "3": "s1", "4": "s1", "5": "1", "6": "1", "7": "2", "8": "3", "9": "3"}
CODE = {"A": "A", "D1": "A", "D2": "A", "D3": "A", "D4": "A", "W": "W"}   # README-only commits run A's code
SOURCE = "src/flag_gems/ops/argmax.py"
PATCH = Path(__file__).resolve().parent / "holdout_patches" / "v3_W_argmax_wrapper.py"
FILES = (("flaggems_record.log", ".log", "log"), ("kernels.json", ".kernels.json", "kernels"))
COLS = ["seq", "night", "night_label", "label", "commit", "sha", "kind", "side", "folder", "selection", "wall_s",
        "pytest_s", "first_gpu_s", "status", "rc", "started_utc", "ended_utc", "lease", "kernels_line", "log",
        "kernels", "timing"]
_PASSED = re.compile(r"^\d+ passed.* in ([0-9.]+)s", re.M)


def pytest_s(folder: Path) -> str:
    """pytest's own session time from the process's run.log ("3 passed, 2 deselected in 11.56s")."""
    path = folder / "run.log"
    found = _PASSED.findall(path.read_text(errors="replace")) if path.exists() else []
    return found[-1] if found else "-"


def kept_files(folder: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(folder.iterdir())
            if f.suffix in rec.CACHE_KEEP and not f.name.startswith("__grp__")}


def write_caches(rows: list[dict[str, str]], folders: dict[str, Path], art: Path, out: Path,
                 kept: dict[tuple[str, str], Path] | None = None) -> dict[tuple[str, str], Path]:
    """triton_cache/<label>/<key>/ for every kernel of the label's processes, unless a folder kept under another
    label has the same files (the stand-in then finds it there); returns (label, key) -> kept folder. ``kept``: the
    folders an earlier call kept from another home (``art``: the artifacts of the home these rows' processes are
    in); a (label, key) already kept is not written again."""
    kept = dict(kept or {})
    for label in sorted({r["label"] for r in rows}):
        mine = [r for r in rows if r["label"] == label]
        nightly = [folders[r["seq"]] / "triton_cache" for r in mine if r["kind"] == "night"]
        # an A/B run's TRITON_CACHE_DIR: its night's kernel_cache/<sha12>-<pool>-<device>, shared by its side's runs
        ab_caches = list(dict.fromkeys(art / json.loads((out / r["kernels"]).read_text())["cache_dir"].split(
            "/artifacts/flaggems/", 1)[1] for r in mine if r["kind"] == "ab"))
        keys = {k["cache_key"]: k["name"] for r in mine
                for k in json.loads((out / r["kernels"]).read_text())["kernels"]}
        for key, name in sorted(keys.items()):
            src = next((c / key for c in [*nightly, *ab_caches] if (c / key / f"{name}.json").exists()), None)
            assert src is not None, f"{label}: no cache folder holds {name} {key}"
            if kept.get((label, key)) or any(kept_files(p) == kept_files(src) for (_, k), p in kept.items()
                                             if k == key):
                continue
            dst = out / "triton_cache" / label / key
            dst.mkdir(parents=True)
            for f, data in kept_files(src).items():
                (dst / f).write_bytes(data)
            kept[(label, key)] = dst
    return kept


def check_caches(rows: list[dict[str, str]], folders: dict[str, Path], kept: dict[tuple[str, str], Path],
                 tmp: Path) -> None:
    """Each nightly shard's real cache and one assembled as the stand-in finds its keys (under its label, else under
    any label): the same inventory (names, cache keys, code hashes, launch metadata)."""
    for r in rows:
        if r["kind"] != "night":
            continue
        cache = folders[r["seq"]] / "triton_cache"
        dst = tmp / f"check-{r['seq']}"
        for d in cache.iterdir():
            found = kept.get((r["label"], d.name)) or next((p for (_, k), p in sorted(kept.items()) if k == d.name),
                                                           None)
            if found is not None:
                shutil.copytree(found, dst / d.name)
        assert rec.same_inventory(cache, dst), f"night {r['night']}: kept cache folders give another inventory"
        print(f"night {r['night']} {r['commit']}: {sum(1 for _ in dst.iterdir())} kept folders, same inventory")


def write_upstream(mirror: Path, sha: dict[str, str], out: Path, tmp: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(mirror), *args], check=True, capture_output=True, text=True).stdout
    up = out / "upstream"
    up.mkdir(exist_ok=True)
    changed = git("diff", "--name-only", sha["D4"], sha["W"]).split()
    assert changed == [SOURCE], changed
    for label in ("A", "W"):
        (up / f"argmax_{label}.py").write_text(git("show", f"{sha[label]}:{SOURCE}"))
    assert git("show", f"{sha['D4']}:{SOURCE}") == (up / "argmax_A.py").read_text()   # D1..D4: README only
    (up / "W.diff").write_text(git("diff", sha["D4"], sha["W"]))
    (up / "log.txt").write_text(git("log", "--format=%H %T %s", sha["W"]))
    work = tmp / "w144" / Path(SOURCE).parent
    work.mkdir(parents=True)
    shutil.copyfile(up / "argmax_A.py", work / "argmax.py")
    subprocess.run([sys.executable, str(PATCH), "144"], cwd=tmp / "w144", check=True,
                   env={"PYTHONPATH": str(PATCH.parent)})
    assert (tmp / "w144" / SOURCE).read_text() == (up / "argmax_W.py").read_text(), "W is not the w144 patch"


def main() -> int:
    live = Path(sys.argv[1])
    tmp = Path(tempfile.mkdtemp(prefix="holdout3-record-"))
    home = rec.extract(live / "state" / "home_v3a_after_night9.tar.gz", tmp / "home9")
    home4 = rec.extract(live / "state" / "home_v3a_after_night4.tar.gz", tmp / "home4")
    art, art4 = home / "artifacts" / "flaggems", home4 / "artifacts" / "flaggems"
    for run in sorted(art4.iterdir()):   # nights 5-9 resumed night 4's home: its nights must be the same files
        cmp = filecmp.dircmp(run, art / run.name)
        assert not (cmp.diff_files or cmp.left_only), f"night 4's {run.name} differs in night 9's home"

    sha = {name: s for name, s in (line.split() for line in (live / "shas.txt").read_text().splitlines())
           if name in CODE}
    commit_of = {s: name for name, s in sha.items()}
    runs = {line.split("\t")[3]: line.split("\t") for line in (home / "nights.tsv").read_text().splitlines()}
    rows, folders = [], {}
    for rid, kind, ab, folder in rec.run_folders(art):
        row = rec.process_row(rid, kind, ab, folder, runs, {s: CODE[n] for s, n in commit_of.items()})
        row.update(commit=commit_of[row["sha"]], pytest_s=pytest_s(folder), lease=LEASE[row["night"]])
        rows.append(row)
    for old in ("procs", "triton_cache", "upstream"):
        shutil.rmtree(live / old, ignore_errors=True)
    rows.sort(key=lambda r: r["started_utc"])
    paths = [r["_folder"] for r in rows]
    rec.write_processes(rows, live, COLS, stem_label="commit", files=FILES)
    folders = {r["seq"]: p for r, p in zip(rows, paths, strict=True)}
    kept = write_caches(rows, folders, art, live)
    check_caches(rows, folders, kept, tmp)
    write_upstream(home / "mirrors" / "flaggems.git", sha, live, tmp)

    written = [live / "processes.tsv", *(live / d for d in ("procs", "triton_cache", "upstream"))]
    size = sum(f.stat().st_size for p in written for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
    print(f"{len(rows)} processes ({sum(r['kind'] == 'night' for r in rows)} nightly shards), {len(kept)} kernel "
          f"folders; {size / 1e6:.2f} MB written; {rec.scrubbed} identifier line(s) scrubbed")
    shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
