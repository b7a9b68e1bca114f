"""Hold-out 7's live nights (cos, gelu, softmax, `--mode cudagraph`) as a replay record: every benchmark process zlops
ran, made small and text (tests/data/flaggems_h200/holdout7_2026-12-06/PROVENANCE.md).

    python benchmarks/h200/holdout7_live_record.py /work/evidence/holdout7/nights \
        tests/data/flaggems_h200/holdout7_2026-12-06/live --calls 2

EVIDENCE holds what the device tool brought back from the nights' calls, renamed by call: ``home_v7.tar.gz`` and
``nights_v7.tar.gz`` of the last call (zlops' home after the last night: store, artifacts of every night and A/B
run, the mirror it fetched the nights from; the nights' evidence), ``home_v7_call<k>.tar.gz`` and
``nights_v7_call<k>.tar.gz`` of each earlier call k (checked: each artifact file of an earlier home the same bytes
in the last, its nights.tsv a prefix of the last's, its per-night JSON the last call's). Writes into OUT, for
tests/flaggems_holdout.py's ``HOLDOUT7``, what holdout5_live_record.py writes for hold-out 5 (its functions):

- ``processes.tsv``: one row per benchmark process (the nightly shards and every A/B run) in start order, hold-out
  5's columns: ``label`` the code the process ran (``A`` for A and the README-only D1, ``W`` for W), ``commit``
  the commit's own name, ``pytest_s`` pytest's session time, ``lease`` the call that ran it (each call a fresh machine);
- ``procs/<seq>_n<night>_<night|abNN{A,B}>_<commit>.{log,kernels.json}``: the process's ``flaggems_record.log`` and
  ``kernels.json`` (no GPU identifier is in them; manifests and run_identity.json, which name the GPU, are left
  out);
- ``triton_cache/<label>/<cache key>/``: the ``<kernel>.json`` and ``.cubin`` of every kernel the label's processes
  had, kept once; checked: each nightly shard's real cache and the kept folders give the same inventory;
- ``upstream/``: ``src/flag_gems/ops/cos.py`` of A (``cos_A.py``) and W (``cos_W.py``), ``W.diff``
  (W's parent..W, the only change of the nights' code), ``log.txt``, from the home's ``mirrors/flaggems.git``;
  checked: D1 (if a night ran it) changes README.md only, and ``holdout_patches/v7_W_cos_small.py TERMS`` on
  A's cos.py gives W's;
- the nights' evidence, GPU identifiers scrubbed: ``json/night<N>-<label>.json``, ``json/alerts_at_end.json``,
  ``verdicts.txt``, ``walls.txt``, ``nights.tsv``, ``shas.txt``, ``upstream_log.txt``, ``zlops.yaml``,
  ``config_check.txt``, ``env.txt`` (the last call's), ``env_c<k>.txt`` (earlier calls), ``env_end.txt``, and
  ``night<N>-<label>.txt`` for a night whose zlops did not exit 0;
- ``reports/``: each night's ``report.txt`` and Slack payload (``.slack.json``), where zlops wrote them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import holdout2_live_record as rec  # sibling scripts, not a package
import holdout3_live_record as rec3
import holdout5_live_record as rec5

CODE = {"A": "A", "D1": "A", "W": "W"}   # the README-only D1 runs A's code
SOURCE = "src/flag_gems/ops/cos.py"
PATCH = Path(__file__).resolve().parent / "holdout_patches" / "v7_W_cos_small.py"
TAG = "v7"


def write_upstream(mirror: Path, sha: dict[str, str], rows: str, out: Path, tmp: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(mirror), *args], check=True, capture_output=True, text=True).stdout
    up = out / "upstream"
    up.mkdir()
    parent = git("rev-parse", sha["W"] + "~1").strip()
    assert parent == sha.get("D1", parent)
    assert git("diff", "--name-only", sha["A"], parent).split() == ["README.md"]   # D1: README only
    changed = git("diff", "--name-only", parent, sha["W"]).split()
    assert changed == [SOURCE], changed
    for label in ("A", "W"):
        (up / f"cos_{label}.py").write_text(git("show", f"{sha[label]}:{SOURCE}"))
    (up / "W.diff").write_text(git("diff", parent, sha["W"]))
    (up / "log.txt").write_text(git("log", "--format=%H %T %s", sha["W"]))
    work = tmp / f"w{rows}" / Path(SOURCE).parent
    work.mkdir(parents=True)
    shutil.copyfile(up / "cos_A.py", work / "cos.py")
    subprocess.run([sys.executable, str(PATCH), rows], cwd=tmp / f"w{rows}", check=True,
                   env={"PYTHONPATH": str(PATCH.parent)})
    assert (tmp / f"w{rows}" / SOURCE).read_text() == (up / "cos_W.py").read_text(), f"W is not the {rows}-term patch"


def write_nights(nights: Path, calls: list[Path], out: Path) -> None:
    """The nights' files of the last call, each call's env.txt, the per-night JSON (checked against the earlier
    calls'), the CLI output of a night that did not exit 0."""
    for name in rec5.NIGHT_FILES:
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
        json.loads((out / "json" / f.name).read_text())
        assert (out / "json" / f.name).read_bytes() == f.read_bytes(), f"{f.name}: identifiers found"
    (out / "json" / "alerts_at_end.json").write_text(rec.scrub_text(json.dumps(whole["alerts_at_end"], indent=1))
                                                     + "\n")
    for line in (nights / "nights.tsv").read_text().splitlines():
        night, name, _sha, _rid, _wall, rc = line.split("\t")
        if rc != "0":   # the CLI output is in the nights folder of the call that ran the night
            src = next(d / f"night{night}-{name}.txt" for d in (nights, *calls)
                       if (d / f"night{night}-{name}.txt").exists())
            rec.copy_text(src, out / f"night{night}-{name}.txt")


def write_reports(art: Path, out: Path) -> None:
    """Each night's report and Slack summary as zlops wrote them (``reports/n<N>-<label>.report.txt`` and
    ``.slack.json``, identifiers scrubbed): both state the night's coverage. A night whose zlops the call's own
    time limit killed (during its A/B) wrote neither."""
    for run in sorted(art.glob("nightly_flaggems_n*")):
        if "_ab-" in run.name:
            continue
        stem = run.name.removeprefix("nightly_flaggems_").rsplit("-", 1)[0]
        for src, suffix in ((run / "report.txt", "report.txt"), (run / "slack_payload.json", "slack.json")):
            if src.exists():
                rec.copy_text(src, out / "reports" / f"{stem}.{suffix}")


def check_call_homes(evidence: Path, home: Path, calls: int, tmp: Path) -> None:
    for k in range(1, calls):
        early = rec.extract(evidence / f"home_{TAG}_call{k}.tar.gz", tmp / f"home_call{k}")
        assert (home / "nights.tsv").read_text().startswith((early / "nights.tsv").read_text()), k
        files = [f for f in (early / "artifacts").rglob("*") if f.is_file() and not f.is_symlink()]
        for f in files:
            assert f.read_bytes() == (home / f.relative_to(early)).read_bytes(), f"call {k}'s {f} differs"
        print(f"call {k}'s home: {len(files)} artifact files, each the same in the last call's home")
        shutil.rmtree(early)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("evidence", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--calls", type=int, default=1, help="how many calls ran the nights (the last one's files "
                    "unnumbered, the earlier ones' _call<k>)")
    ap.add_argument("--terms", required=True, help="the W patch's TERMS (the ground truth's pick)")
    args = ap.parse_args()
    evidence, out = args.evidence, args.out
    tmp = Path(tempfile.mkdtemp(prefix="holdout7-record-"))
    home = rec.extract(evidence / f"home_{TAG}.tar.gz", tmp / "home")
    nights = rec.extract(evidence / f"nights_{TAG}.tar.gz", tmp / "nights") / f"nights_{TAG}"
    calls = [rec.extract(evidence / f"nights_{TAG}_call{k}.tar.gz", tmp / f"call{k}") / f"nights_{TAG}"
             for k in range(1, args.calls)]
    art = home / "artifacts" / "flaggems"
    assert (home / "nights.tsv").read_text() == (nights / "nights.tsv").read_text()
    check_call_homes(evidence, home, args.calls, tmp)

    sha = {name: s for name, s in (line.split() for line in (nights / "shas.txt").read_text().splitlines())
           if name in CODE}
    commit_of = {s: name for name, s in sha.items()}
    runs = {line.split("\t")[3]: line.split("\t") for line in (home / "nights.tsv").read_text().splitlines()}
    called = [len((c / "nights.tsv").read_text().splitlines()) for c in calls]   # nights done by the end of call k
    rows = []
    for rid, kind, ab, folder in rec.run_folders(art):
        row = rec.process_row(rid, kind, ab, folder, runs, {s: CODE[n] for s, n in commit_of.items()})
        killed = row["status"] == "running" and runs[rid][5] == str(rec5.INTERRUPTED) and kind == "ab"
        # lease: the machine, counted by call (each call here started a fresh one): a night run by call k is k's
        row.update(commit=commit_of[row["sha"]], pytest_s=rec5.pytest_s(folder, required=not killed),
                   lease=str(next((k for k, n in enumerate(called, 1) if int(runs[rid][0]) <= n), len(called) + 1)))
        if kind == "ab":
            m = rec5._AB_FOLDER.search(ab)
            assert m is not None, ab
            row["side"] = m.group(1)
        row["ab_interrupted"] = "-"
        if kind == "ab" and runs[rid][5] == str(rec5.INTERRUPTED):
            row["ab_interrupted"] = "killed" if killed else "finished"
        assert row["status"] == "ok" or killed, (rid, ab, row["status"])
        rows.append(row)
    assert sum(r["kind"] == "night" for r in rows) == len(runs), len(rows)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rows.sort(key=lambda r: r["started_utc"])
    paths = [r["_folder"] for r in rows]
    rec.write_processes(rows, out, [*rec3.COLS, "ab_interrupted"], stem_label="commit", files=rec3.FILES)
    folders = {r["seq"]: p for r, p in zip(rows, paths, strict=True)}
    with_kernels = [r for r in rows if r["kernels"] != "-"]
    kept = rec3.write_caches(with_kernels, folders, art, out)
    rec3.check_caches(with_kernels, folders, kept, tmp)
    write_upstream(home / "mirrors" / "flaggems.git", sha, args.terms, out, tmp)
    write_nights(nights, calls, out)
    write_reports(art, out)

    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{len(rows)} processes ({sum(r['kind'] == 'night' for r in rows)} nightly shards), {len(kept)} kernel "
          f"folders; {size / 1e6:.2f} MB written; {rec.scrubbed} identifier line(s) scrubbed")
    shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
