"""Hold-out 5's fifth and sixth leases (eleven, then eight live nights, each lease on one warm H200) as replay
records: every benchmark process zlops ran, made small and text.

    python benchmarks/h200/holdout5_live_record.py /work/evidence/holdout5_lease5 \
        tests/data/flaggems_h200/holdout5_2026-12-04/lease5
    python benchmarks/h200/holdout5_live_record.py /work/evidence/holdout5_lease6 \
        tests/data/flaggems_h200/holdout5_2026-12-04/lease6 --lease 6 \
        --like tests/data/flaggems_h200/holdout5_2026-12-04/lease5

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

Lease 6 (``--lease 6 --like LEASE5``; PROVENANCE.md, "Lease 6"): the same evidence less the nvidia-smi files, plus
``home_v5_call1.tar.gz`` / ``home_v5_call2.tar.gz`` (zlops' home after calls 1 and 2: every artifact file in them
checked byte-identical in call 3's home, and their nights.tsv a prefix of it). Differences in what is written:

- ``processes.tsv``: the 8 nightly shards, night 6's 10 A/B runs (D1 against A: both sides A's code, ``label`` A),
  night 7's 12 (W against D1, folders ``<NN>A-<base sha12>`` for the base side) and night 8's A/B runs (W against A,
  under ``ab/h200/<base sha12>/``), ``lease`` ``6`` and one more column, ``ab_interrupted``: ``-`` but for the A/B
  of a night whose zlops was killed (nights.tsv exit 124): ``finished`` for its runs that ended (their records
  exist; the A/B's judgement was never stored) and ``killed`` for the run in flight (manifest ``running``, no
  record, no timing: its files are ``-``);
- ``triton_cache/`` as for lease 5, plus ``triton_cache.tsv``: for every kernel any process of the lease had (label,
  cache key, name), the folder the stand-in finds its files in and how LEASE5's folders of the same key differ
  (``identical``, ``same code (N bytes differ)``: the metadata the same, the cubins the same code by zlops' code
  hash; a key with other code fails the script). None was identical (the cubins' DWARF source-file records differ:
  the worktree's paths and file times), so every folder is kept (a replay reads one record's ``triton_cache/``);
- ``upstream/`` is not written: the mirror's A, D1, W are checked as for lease 5 and the files they give are checked
  byte-identical to LEASE5's ``upstream/``;
- ``night<N>-<label>.txt``: the CLI output of each night whose zlops did not exit 0 (night 8: "zlops: interrupted").
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
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
# an A/B run's folder: <NN><side>, the base side of a night with several bases <NN>A-<base sha12>
_AB_FOLDER = re.compile(r"(?:^|/)\d{2}([AB])(?:-[0-9a-f]{12})?$")
NIGHT_FILES = ("verdicts.txt", "walls.txt", "nights.tsv", "shas.txt", "upstream_log.txt", "zlops.yaml",
               "config_check.txt", "env.txt", "env_end.txt")
INTERRUPTED = 124   # the exit code of a night whose zlops the call's own `timeout` killed


@dataclass(frozen=True)
class Lease:
    nights: int                # nightly shards (one per night)
    smi: bool                  # nvidia-smi -q before and after the last call (smi_before.txt, smi_after.txt)
    homes: tuple[int, ...]     # calls whose home tarball (home_v5_call<k>.tar.gz) is checked against the last's
    ab_interrupted: bool       # processes.tsv's ab_interrupted column


LEASES = {"5": Lease(nights=11, smi=True, homes=(), ab_interrupted=False),
          "6": Lease(nights=8, smi=False, homes=(1, 2), ab_interrupted=True)}


def pytest_s(folder: Path, *, required: bool = True) -> str:
    """pytest's own session time from the process's run.log ("2 failed, 3 passed, 5 deselected in 10.30s"); ``-``
    for a process killed before its summary when not ``required``."""
    found = _SESSION.findall((folder / "run.log").read_text(errors="replace"))
    assert found or not required, folder
    return found[-1] if found else "-"


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


def same_tree(a: Path, b: Path) -> bool:
    files = sorted(f.relative_to(a) for f in a.rglob("*") if f.is_file())
    return files == sorted(f.relative_to(b) for f in b.rglob("*") if f.is_file()) and all(
        (a / f).read_bytes() == (b / f).read_bytes() for f in files)


def write_nights(evidence: Path, nights: Path, calls: list[Path], out: Path, lease: Lease) -> None:
    """The nights' files of the last call, each call's env.txt, the per-night JSON (checked against the earlier
    calls'), the CLI output of a night that did not exit 0."""
    for name in NIGHT_FILES:
        rec.copy_text(nights / name, out / name)
    for k, call in enumerate(calls, 1):
        rec.copy_text(call / "env.txt", out / f"env_c{k}.txt")
        for f in sorted((call / "json").glob("night*-*.json")):   # each night's JSON was written once, after it
            assert f.read_bytes() == (nights / "json" / f.name).read_bytes(), f"call {k}'s {f.name} differs"
    whole = json.loads((nights / "json" / "nights.json").read_text())
    per_night = sorted((nights / "json").glob("night*-*.json"), key=lambda p: int(p.name[5:].split("-")[0]))
    assert [json.loads(p.read_text()) for p in per_night] == whole["nights"]
    assert len(per_night) == lease.nights, len(per_night)
    for f in per_night:
        rec.copy_text(f, out / "json" / f.name)
        json.loads((out / "json" / f.name).read_text())   # scrubbing removed no line of it
        assert (out / "json" / f.name).read_bytes() == f.read_bytes(), f"{f.name}: identifiers found"
    (out / "json" / "alerts_at_end.json").write_text(rec.scrub_text(json.dumps(whole["alerts_at_end"], indent=1))
                                                     + "\n")
    for line in (nights / "nights.tsv").read_text().splitlines():
        night, name, _sha, _rid, _wall, rc = line.split("\t")
        if rc != "0":
            rec.copy_text(nights / f"night{night}-{name}.txt", out / f"night{night}-{name}.txt")
    if lease.smi:
        for name in ("smi_before.txt", "smi_after.txt"):
            rec.copy_text(evidence / name, out / name)


def check_call_homes(evidence: Path, home: Path, lease: Lease, tmp: Path) -> None:
    """An earlier call's home (the same warm machine, resumed by the next call): each of its artifact files the
    same bytes in the last call's home, its nights.tsv a prefix of the last's."""
    for k in lease.homes:
        early = rec.extract(evidence / f"home_v5_call{k}.tar.gz", tmp / f"home_call{k}")
        assert (home / "nights.tsv").read_text().startswith((early / "nights.tsv").read_text()), k
        files = [f for f in (early / "artifacts").rglob("*") if f.is_file() and not f.is_symlink()]
        for f in files:
            assert f.read_bytes() == (home / f.relative_to(early)).read_bytes(), f"call {k}'s {f} differs"
        print(f"call {k}'s home: {len(files)} artifact files, each the same in the last call's home")
        shutil.rmtree(early)


def code_differs(a: Path, b: Path) -> str:
    """How two cache folders of one key differ: ``identical``, ``same code (N bytes differ)`` (the metadata the same,
    the binaries the same code by zlops' code hash, which leaves out source locations), or ``other code``."""
    fa, fb = rec3.kept_files(a), rec3.kept_files(b)
    if fa == fb:
        return "identical"
    from zlops.kernels.codehash import code_digest

    if fa.keys() != fb.keys() or any(fa[f] != fb[f] for f in fa if not f.endswith(".cubin")):
        return "other code"
    if any(code_digest(fa[f], "cubin") != code_digest(fb[f], "cubin") for f in fa if f.endswith(".cubin")):
        return "other code"
    n = sum(x != y for f in fa if f.endswith(".cubin") for x, y in zip(fa[f], fb[f], strict=True)
            ) if all(len(fa[f]) == len(fb[f]) for f in fa) else -1
    return f"same code ({n} bytes differ)" if n >= 0 else "same code (other length)"


def compare_caches(rows: list[dict[str, str]], kept: dict[tuple[str, str], Path], out: Path, like: Path) -> None:
    """triton_cache.tsv: for every kernel the processes had (label, key, name), the folder the stand-in finds it in
    (under its label, else under any: relative to the records' parent) and how ``like``'s folders of the same key
    differ from it (:func:`code_differs`). Every folder stays (a replay reads one record's triton_cache/): lease
    6's cubins differ from lease 5's in a few bytes each (source locations), none is byte-identical."""
    names = {(r["label"], k["cache_key"]): k["name"] for r in rows
             for k in json.loads((out / r["kernels"]).read_text())["kernels"]}
    lines = [f"label\tcache_key\tname\tkept\t{like.name}"]
    for (label, key), name in sorted(names.items()):
        path = kept.get((label, key)) or next((p for (_, k), p in sorted(kept.items()) if k == key), None)
        assert path is not None and (path / f"{name}.json").exists(), (label, key, name)
        how = sorted({code_differs(path, p) for p in sorted((like / "triton_cache").glob(f"*/{key}"))})
        assert "other code" not in how, (label, key, name, how)   # one cache key, one compiled code
        lines.append(f"{label}\t{key}\t{name}\t{path.relative_to(out.parent).as_posix()}\t{', '.join(how) or '-'}")
    (out / "triton_cache.tsv").write_text("\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("evidence", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--lease", default="5", choices=sorted(LEASES))
    ap.add_argument("--like", type=Path, help="an earlier lease's record: its upstream/ and triton_cache/ are "
                    "checked against and not kept twice")
    args = ap.parse_args()
    evidence, out, lease = args.evidence, args.out, LEASES[args.lease]
    assert (args.like is None) == (args.lease == "5"), "--like: the earlier lease's record, for lease 6 only"
    tmp = Path(tempfile.mkdtemp(prefix="holdout5-record-"))
    home = rec.extract(evidence / "home_v5.tar.gz", tmp / "home")
    nights = rec.extract(evidence / "nights_v5.tar.gz", tmp / "nights") / "nights_v5"
    calls = [rec.extract(evidence / f"nights_v5_call{k}.tar.gz", tmp / f"call{k}") / "nights_v5" for k in (1, 2)]
    art = home / "artifacts" / "flaggems"
    assert (home / "nights.tsv").read_text() == (nights / "nights.tsv").read_text()
    check_call_homes(evidence, home, lease, tmp)

    sha = {name: s for name, s in (line.split() for line in (nights / "shas.txt").read_text().splitlines())
           if name in CODE}
    commit_of = {s: name for name, s in sha.items()}
    runs = {line.split("\t")[3]: line.split("\t") for line in (home / "nights.tsv").read_text().splitlines()}
    rows = []
    for rid, kind, ab, folder in rec.run_folders(art):
        row = rec.process_row(rid, kind, ab, folder, runs, {s: CODE[n] for s, n in commit_of.items()})
        killed = row["status"] == "running" and runs[rid][5] == str(INTERRUPTED) and kind == "ab"
        row.update(commit=commit_of[row["sha"]], pytest_s=pytest_s(folder, required=not killed), lease=args.lease)
        if kind == "ab":
            m = _AB_FOLDER.search(ab)
            assert m is not None, ab
            row["side"] = m.group(1)
        if lease.ab_interrupted:
            row["ab_interrupted"] = "-"
            if kind == "ab" and runs[rid][5] == str(INTERRUPTED):
                row["ab_interrupted"] = "killed" if killed else "finished"
        assert row["status"] == "ok" or killed, (rid, ab, row["status"])
        rows.append(row)
    assert sum(r["kind"] == "night" for r in rows) == lease.nights, len(rows)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rows.sort(key=lambda r: r["started_utc"])
    paths = [r["_folder"] for r in rows]
    cols = rec3.COLS + (["ab_interrupted"] if lease.ab_interrupted else [])
    rec.write_processes(rows, out, cols, stem_label="commit", files=rec3.FILES)
    folders = {r["seq"]: p for r, p in zip(rows, paths, strict=True)}
    with_kernels = [r for r in rows if r["kernels"] != "-"]   # not the run killed in flight
    kept = rec3.write_caches(with_kernels, folders, art, out)
    rec3.check_caches(with_kernels, folders, kept, tmp)
    if args.like is None:
        write_upstream(home / "mirrors" / "flaggems.git", sha, out, tmp)
    else:
        compare_caches(with_kernels, kept, out, args.like)
        write_upstream(home / "mirrors" / "flaggems.git", sha, tmp, tmp)
        assert same_tree(tmp / "upstream", args.like / "upstream"), "the upstream differs from the earlier lease's"
    write_nights(evidence, nights, calls, out, lease)

    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{len(rows)} processes ({sum(r['kind'] == 'night' for r in rows)} nightly shards), {len(kept)} kernel "
          f"folders; {size / 1e6:.2f} MB written; {rec.scrubbed} identifier line(s) scrubbed")
    shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
