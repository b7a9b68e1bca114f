"""Hold-out 5's fifth lease (eleven live nights on one warm H200) as a replay record: every benchmark process zlops
ran, made small and text.

    python benchmarks/h200/holdout5_live_record.py /work/evidence/holdout5_lease5 \
        tests/data/flaggems_h200/holdout5_2026-12-04/lease5

EVIDENCE holds what the device tool brought back from the three calls (PROVENANCE.md, "Lease 5"):
``home_v5.tar.gz`` (zlops' home after night 11: store, artifacts of every night and A/B run, the mirror it fetched
the nights from), ``nights_v5.tar.gz`` (after call 3), ``nights_v5_call1.tar.gz`` / ``nights_v5_call2.tar.gz``
(after calls 1 and 2; their per-night JSON must be call 3's, checked) and ``smi_before.txt`` / ``smi_after.txt``.
Writes into OUT, for tests/flaggems_holdout.py's ``HOLDOUT5`` (the stand-in serves these processes to the real
``zlops nightly``):

- ``processes.tsv``: one row per benchmark process (11 nightly shards, the 10 A/B runs of night 7), in start order,
  hold-out 3's columns (benchmarks/h200/holdout3_live_record.py, whose functions this uses with hold-out 2's):
  ``label`` the code the process ran (``A`` for A and the README-only D1, ``W`` for W), ``commit`` the commit's own
  name, ``pytest_s`` (pytest's own session time, "2 failed, 3 passed, 5 deselected in X s": start-up before it
  excluded), ``first_gpu_s`` (an upper bound of the start-up, from the 1-s telemetry) and ``lease`` (``5``: one
  machine for all three calls);
- ``procs/<seq>_n<night>_<night|abNN{A,B}>_<commit>.{log,kernels.json}``: the process's ``flaggems_record.log`` and
  ``kernels.json``, GPU identifiers scrubbed (none are in them: only the manifests and run_identity.json, left out,
  name the GPU);
- ``triton_cache/<label>/<cache key>/``: for every kernel any process of the label had, the real cache folder's
  ``<kernel>.json`` and ``.cubin``, kept once (a folder identical under another label is looked up there);
  checked: each nightly shard's real cache and the kept folders give the same inventory;
- ``upstream/``: ``src/flag_gems/ops/amin.py`` of A (``amin_A.py``) and W (``amin_W.py``), ``W.diff`` (D1..W, the
  only change of the nights' code), ``log.txt`` (sha, tree, subject), from the home's ``mirrors/flaggems.git``;
  checked: D1 changes README.md only, and ``holdout_patches/v5_W_amin_wrapper.py 524288`` on A's amin.py gives W's;
- the nights' evidence, GPU identifiers scrubbed: ``json/night<N>-<label>.json`` (what
  flaggems_holdout_nights_summary.py read from the store after each night), ``json/alerts_at_end.json`` (the
  ``alerts_at_end`` of call 3's ``nights.json``, whose ``nights`` are the per-night files: checked, not kept twice),
  ``verdicts.txt``, ``walls.txt``, ``nights.tsv``, ``shas.txt``, ``upstream_log.txt``, ``zlops.yaml``,
  ``config_check.txt``, ``env.txt`` (call 3's), ``env_c1.txt`` / ``env_c2.txt`` (calls 1-2), ``env_end.txt``,
  ``smi_before.txt`` / ``smi_after.txt`` (nvidia-smi -q before and after call 3).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import holdout2_live_record as rec  # sibling scripts, not a package
import holdout3_live_record as rec3

CODE = {"A": "A", "D1": "A", "W": "W"}   # the README-only D1 runs A's code
SOURCE = "src/flag_gems/ops/amin.py"
PATCH = Path(__file__).resolve().parent / "holdout_patches" / "v5_W_amin_wrapper.py"
ROWS = "524288"
# pytest's summary line; these processes exit 1 (test_amin's two other dtypes raise), so it starts with "2 failed, "
_SESSION = re.compile(r"^(?:\d+ \w+, )*\d+ passed.* in ([0-9.]+)s", re.M)
NIGHT_FILES = ("verdicts.txt", "walls.txt", "nights.tsv", "shas.txt", "upstream_log.txt", "zlops.yaml",
               "config_check.txt", "env.txt", "env_end.txt")


def pytest_s(folder: Path) -> str:
    """pytest's own session time from the process's run.log ("2 failed, 3 passed, 5 deselected in 10.30s")."""
    found = _SESSION.findall((folder / "run.log").read_text(errors="replace"))
    assert found, folder
    return found[-1]


def write_upstream(mirror: Path, sha: dict[str, str], out: Path, tmp: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(mirror), *args], check=True, capture_output=True, text=True).stdout
    up = out / "upstream"
    up.mkdir()
    assert git("diff", "--name-only", sha["A"], sha["D1"]).split() == ["README.md"]
    changed = git("diff", "--name-only", sha["D1"], sha["W"]).split()
    assert changed == [SOURCE], changed
    assert git("rev-parse", sha["W"] + "~1").strip() == sha["D1"]
    for label in ("A", "W"):
        (up / f"amin_{label}.py").write_text(git("show", f"{sha[label]}:{SOURCE}"))
    (up / "W.diff").write_text(git("diff", sha["D1"], sha["W"]))
    (up / "log.txt").write_text(git("log", "--format=%H %T %s", sha["W"]))
    work = tmp / "w524288" / Path(SOURCE).parent
    work.mkdir(parents=True)
    shutil.copyfile(up / "amin_A.py", work / "amin.py")
    subprocess.run([sys.executable, str(PATCH), ROWS], cwd=tmp / "w524288", check=True,
                   env={"PYTHONPATH": str(PATCH.parent)})
    assert (tmp / "w524288" / SOURCE).read_text() == (up / "amin_W.py").read_text(), "W is not the 524288 patch"


def write_nights(evidence: Path, nights: Path, calls: list[Path], out: Path) -> None:
    """The nights' files of call 3, each call's env.txt, the per-night JSON (checked against calls 1-2's)."""
    for name in NIGHT_FILES:
        rec.copy_text(nights / name, out / name)
    for k, call in enumerate(calls, 1):
        rec.copy_text(call / "env.txt", out / f"env_c{k}.txt")
        for f in sorted((call / "json").glob("night*-*.json")):   # each night's JSON was written once, after it
            assert f.read_bytes() == (nights / "json" / f.name).read_bytes(), f"call {k}'s {f.name} differs"
    whole = json.loads((nights / "json" / "nights.json").read_text())
    per_night = sorted((nights / "json").glob("night*-*.json"), key=lambda p: int(p.name[5:].split("-")[0]))
    assert [json.loads(p.read_text()) for p in per_night] == whole["nights"]
    for f in per_night:
        rec.copy_text(f, out / "json" / f.name)
        json.loads((out / "json" / f.name).read_text())   # scrubbing removed no line of it
        assert (out / "json" / f.name).read_bytes() == f.read_bytes(), f"{f.name}: identifiers found"
    (out / "json" / "alerts_at_end.json").write_text(rec.scrub_text(json.dumps(whole["alerts_at_end"], indent=1))
                                                     + "\n")
    for name in ("smi_before.txt", "smi_after.txt"):
        rec.copy_text(evidence / name, out / name)


def main() -> int:
    evidence, out = Path(sys.argv[1]), Path(sys.argv[2])
    tmp = Path(tempfile.mkdtemp(prefix="holdout5-record-"))
    home = rec.extract(evidence / "home_v5.tar.gz", tmp / "home")
    nights = rec.extract(evidence / "nights_v5.tar.gz", tmp / "nights") / "nights_v5"
    calls = [rec.extract(evidence / f"nights_v5_call{k}.tar.gz", tmp / f"call{k}") / "nights_v5" for k in (1, 2)]
    art = home / "artifacts" / "flaggems"
    assert (home / "nights.tsv").read_text() == (nights / "nights.tsv").read_text()

    sha = {name: s for name, s in (line.split() for line in (nights / "shas.txt").read_text().splitlines())
           if name in CODE}
    commit_of = {s: name for name, s in sha.items()}
    runs = {line.split("\t")[3]: line.split("\t") for line in (home / "nights.tsv").read_text().splitlines()}
    rows = []
    for rid, kind, ab, folder in rec.run_folders(art):
        row = rec.process_row(rid, kind, ab, folder, runs, {s: CODE[n] for s, n in commit_of.items()})
        row.update(commit=commit_of[row["sha"]], pytest_s=pytest_s(folder), lease="5")
        rows.append(row)
    assert sum(r["kind"] == "night" for r in rows) == 11, len(rows)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rows.sort(key=lambda r: r["started_utc"])
    paths = [r["_folder"] for r in rows]
    rec.write_processes(rows, out, rec3.COLS, stem_label="commit", files=rec3.FILES)
    folders = {r["seq"]: p for r, p in zip(rows, paths, strict=True)}
    kept = rec3.write_caches(rows, folders, art, out)
    rec3.check_caches(rows, folders, kept, tmp)
    write_upstream(home / "mirrors" / "flaggems.git", sha, out, tmp)
    write_nights(evidence, nights, calls, out)

    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{len(rows)} processes ({sum(r['kind'] == 'night' for r in rows)} nightly shards), {len(kept)} kernel "
          f"folders; {size / 1e6:.2f} MB written; {rec.scrubbed} identifier line(s) scrubbed")
    shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
