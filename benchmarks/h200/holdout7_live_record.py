"""Hold-out 7's live nights (cos, gelu, softmax, `--mode cudagraph`) as a replay record: every benchmark process zlops
ran, made small and text (tests/data/flaggems_h200/holdout7_2026-12-06/PROVENANCE.md).

    python benchmarks/h200/holdout7_live_record.py /work/evidence/holdout7/nights \
        tests/data/flaggems_h200/holdout7_2026-12-06/live --calls 2 --terms 16
    python benchmarks/h200/holdout7_live_record.py /work/evidence/holdout7b \
        tests/data/flaggems_h200/holdout7_2026-12-06/live_k10 --terms 10 --leases 1,2,3 4,5 --resumed 4=2 \
        --groundtruth /work/evidence/holdout7b/call1/holdout_gt7.tar.gz

EVIDENCE holds what the device tool brought back from the nights' calls, in one of two layouts:

- ``--calls N`` (the first record, ``live/``): ``home_v7.tar.gz`` and ``nights_v7.tar.gz`` of the last call (zlops'
  home after the last night: store, artifacts of every night and A/B run, the mirror it fetched the nights from;
  the nights' evidence), ``home_v7_call<k>.tar.gz`` and ``nights_v7_call<k>.tar.gz`` of each earlier call k. Each
  call a fresh machine (its own lease) that resumed the home of the call before it.
- ``--leases 1,2,3 4,5`` (``live_k10/``): ``call<k>/home_v7.tar.gz``, ``call<k>/nights_v7.tar.gz`` and
  ``call<k>/call<k>_output.txt`` of every call. Each argument is one lease, the calls one machine ran, each resuming
  the home of the call before it; a later lease's first call began from the home of the call ``--resumed K=J`` names
  (default: the previous lease's last call). So the calls form a tree of homes: every call no later call resumed
  ends a *branch* (the calls from a fresh home to it), and its home holds every night of the branch. Two branches
  can hold two different nights of one number (``live_k10``: lease 1's night 9 and lease 2's, both begun from the
  home after night 8).

Checked: each call's home holds every artifact file of the home it resumed, the same bytes, and that home's
nights.tsv as a prefix of its own; each call's per-night JSON is its branch's last call's. A run folder (a night
and its A/B runs) that two branches' homes hold, the same files, is one night, recorded once (lease 2's nights 1-8
are lease 1's); the others are each branch's own.

Writes into OUT, for tests/flaggems_holdout.py's ``HOLDOUT7`` / ``HOLDOUT7_K10``, what holdout5_live_record.py writes
for hold-out 5 (its functions):

- ``processes.tsv``: one row per benchmark process (the nightly shards and every A/B run of every branch) in start
  order, hold-out 5's columns: ``label`` the code the process ran (``A`` for A and the README-only D1, ``W`` for W),
  ``commit`` the commit's own name, ``pytest_s`` pytest's session time, ``lease`` the machine that ran it, with
  ``--leases`` also ``call`` (the device call), and ``ab_interrupted`` (``killed`` / ``finished`` for the A/B runs of a
  night whose zlops the call's own time limit killed, exit 124);
- ``procs/<seq>_n<night>_<night|abNN{A,B}>_<commit>.{log,kernels.json}``: the process's ``flaggems_record.log`` and
  ``kernels.json`` (no GPU identifier is in them; manifests and run_identity.json, which name the GPU, are left
  out);
- ``triton_cache/<label>/<cache key>/``: the ``<kernel>.json`` and ``.cubin`` of every kernel the label's processes
  had, kept once: a key a later branch's processes share with an earlier branch's keeps the earlier branch's folder
  (another machine's cubins differ in their source-location records only; checked: each nightly shard's real cache
  and the kept folders give the same inventory, names, keys, code hashes, launch metadata);
- ``upstream/``: ``src/flag_gems/ops/cos.py`` of A (``cos_A.py``) and W (``cos_W.py``), ``W.diff``
  (W's parent..W, the only change of the nights' code), ``log.txt``, from the first branch's ``mirrors/flaggems.git``;
  checked: D1 (if a night ran it) changes README.md only, ``holdout_patches/v7_W_cos_small.py TERMS`` on A's cos.py
  gives W's, and every other branch's mirror gives the same files;
- the first branch's evidence, GPU identifiers scrubbed: ``json/night<N>-<label>.json``, ``json/alerts_at_end.json``,
  ``verdicts.txt``, ``walls.txt``, ``nights.tsv``, ``shas.txt``, ``upstream_log.txt``, ``zlops.yaml``,
  ``config_check.txt``, ``env.txt`` (its last call's), ``env_c<k>.txt`` (its earlier calls), ``env_end.txt``, and
  ``night<N>-<label>.txt`` for a night whose zlops did not exit 0; ``reports/``: each night's ``report.txt`` and
  Slack payload (``.slack.json``), where zlops wrote them; ``call<k>_output.txt``: each call's printed output (with
  ``--leases``);
- each further branch's, the same, in ``lease<L>/`` (L: its last call's lease), for its own nights only (the
  files of the first branch that are the same bytes, e.g. ``shas.txt``, are not kept twice);
- ``groundtruth/`` (``--groundtruth``): the ground truth's tarball (``holdout_gt7/``: ``sel/`` the interleaved fresh
  ``-m cos`` processes of A and the candidates with their stamps, ``gt7_summary.txt``, ``env.txt``, ...), scrubbed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import holdout2_live_record as rec  # sibling scripts, not a package
import holdout3_live_record as rec3
import holdout5_live_record as rec5

CODE = {"A": "A", "D1": "A", "W": "W"}   # the README-only D1 runs A's code
SOURCE = "src/flag_gems/ops/cos.py"
PATCH = Path(__file__).resolve().parent / "holdout_patches" / "v7_W_cos_small.py"
TAG = "v7"
SHARED = ("shas.txt", "upstream_log.txt", "zlops.yaml", "config_check.txt")   # the same for every branch


@dataclass(frozen=True)
class Call:
    """One device call of the nights: its number, the machine (lease) it ran on, the call whose home it began from
    (``None``: a fresh home), and its files."""

    k: int
    lease: int
    resumed: int | None
    home: Path
    nights: Path
    output: Path | None = None


def calls_layout(evidence: Path, n: int) -> list[Call]:
    """``--calls N``: the last call's files unnumbered, call k's ``_call<k>``; each call a fresh machine (its own
    lease) that resumed the call before it."""
    return [Call(k, k, k - 1 or None, evidence / f"home_{TAG}{'' if k == n else f'_call{k}'}.tar.gz",
                 evidence / f"nights_{TAG}{'' if k == n else f'_call{k}'}.tar.gz") for k in range(1, n + 1)]


def leases_layout(evidence: Path, leases: list[str], resumed: list[str]) -> list[Call]:
    """``--leases 1,2,3 4,5 --resumed 4=2``: ``call<k>/`` per call; a lease's calls one machine, each resuming the one
    before; a lease's first call resuming the call ``--resumed`` names, else the previous lease's last."""
    began = {int(k): int(j) for k, j in (r.split("=") for r in resumed)}
    calls: list[Call] = []
    for lease, group in enumerate(leases, 1):
        ks = [int(k) for k in group.split(",")]
        for i, k in enumerate(ks):
            before = ks[i - 1] if i else began.get(k, calls[-1].k if calls else None)
            d = evidence / f"call{k}"
            calls.append(Call(k, lease, before, d / f"home_{TAG}.tar.gz", d / f"nights_{TAG}.tar.gz",
                              d / f"call{k}_output.txt"))
    assert set(began) <= {c.k for c in calls}, began
    return calls


def branches(calls: list[Call]) -> list[list[Call]]:
    """The calls from a fresh home to each call no later call resumed, in call order."""
    by = {c.k: c for c in calls}
    resumed = {c.resumed for c in calls}
    out = []
    for leaf in (c for c in calls if c.k not in resumed):
        chain = [leaf]
        while chain[-1].resumed is not None:
            chain.append(by[chain[-1].resumed])
        out.append(chain[::-1])
    return out


def check_resumed(homes: dict[int, Path], calls: list[Call]) -> None:
    """Each call's home holds every artifact file of the home it resumed (the same bytes) and that home's nights.tsv
    as a prefix of its own."""
    for c in calls:
        if c.resumed is None:
            continue
        early, home = homes[c.resumed], homes[c.k]
        assert (home / "nights.tsv").read_text().startswith((early / "nights.tsv").read_text()), c.k
        files = [f for f in (early / "artifacts").rglob("*") if f.is_file() and not f.is_symlink()]
        for f in files:
            assert f.read_bytes() == (home / f.relative_to(early)).read_bytes(), f"call {c.resumed}'s {f} differs"
        print(f"call {c.k} resumed call {c.resumed}'s home: its {len(files)} artifact files the same")


def write_upstream(mirror: Path, sha: dict[str, str], rows: str, out: Path, tmp: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(mirror), *args], check=True, capture_output=True, text=True).stdout
    up = out / "upstream"
    up.mkdir(parents=True)
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
    work.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(up / "cos_A.py", work / "cos.py")
    subprocess.run([sys.executable, str(PATCH), rows], cwd=tmp / f"w{rows}", check=True,
                   env={"PYTHONPATH": str(PATCH.parent)})
    assert (tmp / f"w{rows}" / SOURCE).read_text() == (up / "cos_W.py").read_text(), f"W is not the {rows}-term patch"


def write_nights(nights: Path, calls: list[Path], out: Path, own: set[int], first: Path | None) -> None:
    """The nights' files of the branch's last call, each earlier call's env.txt, the per-night JSON of the branch's
    own nights (checked against the earlier calls' and, for a night another branch recorded, against its JSON in
    ``first``), the CLI output of an own night that did not exit 0. ``calls``: (k, nights folder) of the earlier
    calls whose env the branch keeps."""
    for name in rec5.NIGHT_FILES:
        if name == "env.txt":
            continue
        if first is not None and name in SHARED:   # kept once, in the first branch's folder
            assert rec.scrub_text((nights / name).read_text()) == (first / name).read_text(), name
            continue
        rec.copy_text(nights / name, out / name)
    rec.copy_text(nights / "env.txt", out / "env.txt")
    for k, call in calls:
        rec.copy_text(call / "env.txt", out / f"env_c{k}.txt")
        for f in sorted((call / "json").glob("night*-*.json")):   # each night's JSON was written once, after it
            assert f.read_bytes() == (nights / "json" / f.name).read_bytes(), f"call {k}'s {f.name} differs"
    whole = json.loads((nights / "json" / "nights.json").read_text())
    per_night = sorted((nights / "json").glob("night*-*.json"), key=lambda p: int(p.name[5:].split("-")[0]))
    assert [json.loads(p.read_text()) for p in per_night] == whole["nights"]
    for f in per_night:
        if int(f.name[5:].split("-")[0]) not in own:
            assert first is not None and f.read_bytes() == (first / "json" / f.name).read_bytes(), f.name
            continue
        rec.copy_text(f, out / "json" / f.name)
        json.loads((out / "json" / f.name).read_text())
        assert (out / "json" / f.name).read_bytes() == f.read_bytes(), f"{f.name}: identifiers found"
    (out / "json" / "alerts_at_end.json").write_text(rec.scrub_text(json.dumps(whole["alerts_at_end"], indent=1))
                                                     + "\n")
    for line in (nights / "nights.tsv").read_text().splitlines():
        night, name, _sha, _rid, _wall, rc = line.split("\t")
        if rc != "0" and int(night) in own:   # the CLI output is in the nights folder of the call that ran the night
            src = next(d / f"night{night}-{name}.txt" for d in (nights, *(c for _, c in calls))
                       if (d / f"night{night}-{name}.txt").exists())
            rec.copy_text(src, out / f"night{night}-{name}.txt")


def write_reports(art: Path, out: Path, own: set[int]) -> None:
    """Each own night's report and Slack summary as zlops wrote them (``reports/n<N>-<label>.report.txt`` and
    ``.slack.json``, identifiers scrubbed): both state the night's coverage. A night whose zlops the call's own
    time limit killed (during its A/B) wrote neither."""
    for run in sorted(art.glob("nightly_flaggems_n*")):
        if "_ab-" in run.name:
            continue
        stem = run.name.removeprefix("nightly_flaggems_").rsplit("-", 1)[0]
        if int(stem[1:].split("-")[0]) not in own:
            continue
        for src, suffix in ((run / "report.txt", "report.txt"), (run / "slack_payload.json", "slack.json")):
            if src.exists():
                rec.copy_text(src, out / "reports" / f"{stem}.{suffix}")


def branch_rows(chain: list[Call], home: Path, nights: dict[int, Path], commit_of: dict[str, str],
                earlier: list[Path], before: set[int]) -> tuple[list[dict], set[int]]:
    """The processes.tsv rows of the branch's own nights (``_folder``: the process's folder, ``_art``: its home's
    artifacts) and those nights' numbers. A night run by a call of an earlier branch (``before``) is that branch's:
    checked, its run folder (the night, its A/B runs) is in the ``earlier`` branches' artifacts with the same files."""
    art = home / "artifacts" / "flaggems"
    runs = {line.split("\t")[3]: line.split("\t") for line in (home / "nights.tsv").read_text().splitlines()}
    done = [len((nights[c.k] / "nights.tsv").read_text().splitlines()) for c in chain]   # nights by the end of call

    def call_of(rid: str) -> Call:
        return chain[next(i for i, n in enumerate(done) if int(runs[rid][0]) <= n)]
    own = set()
    for run in sorted(art.glob("nightly_flaggems_n*")):
        if "_ab-base" in run.name:
            continue
        rid = run.name[len("nightly_flaggems_"):].rsplit("-", 1)[0]
        shared = any((e / run.name).is_dir() and rec5.same_tree(run, e / run.name) for e in earlier)
        assert shared == (call_of(rid).k in before), (rid, call_of(rid).k, shared)
        if not shared:
            own.add(int(runs[rid][0]))
    rows = []
    for rid, kind, ab, folder in rec.run_folders(art):
        if int(runs[rid][0]) not in own:
            continue
        call = call_of(rid)
        row = rec.process_row(rid, kind, ab, folder, runs, {s: CODE[n] for s, n in commit_of.items()})
        killed = row["status"] == "running" and runs[rid][5] == str(rec5.INTERRUPTED) and kind == "ab"
        row.update(commit=commit_of[row["sha"]], pytest_s=rec5.pytest_s(folder, required=not killed),
                   lease=str(call.lease), call=str(call.k), _art=art)
        if kind == "ab":
            m = rec5._AB_FOLDER.search(ab)
            assert m is not None, ab
            row["side"] = m.group(1)
        row["ab_interrupted"] = "-"
        if kind == "ab" and runs[rid][5] == str(rec5.INTERRUPTED):
            row["ab_interrupted"] = "killed" if killed else "finished"
        assert row["status"] == "ok" or killed, (rid, ab, row["status"])
        rows.append(row)
    assert sum(r["kind"] == "night" for r in rows) == len(own), (len(rows), own)
    return rows, own


def write_groundtruth(tarball: Path, out: Path, tmp: Path) -> None:
    """The ground truth's tarball (holdout7_call.sh GT=1: ``holdout_gt7/``) as text, scrubbed, in ``groundtruth/``."""
    gt = rec.extract(tarball, tmp / "gt") / "holdout_gt7"
    for f in sorted(gt.rglob("*")):
        if f.is_file():
            rec.copy_text(f, out / "groundtruth" / f.relative_to(gt))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("evidence", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--calls", type=int, default=1, help="how many calls ran the nights (the last one's files "
                    "unnumbered, the earlier ones' _call<k>), each on a fresh machine")
    ap.add_argument("--leases", nargs="+", help="the calls of each lease, e.g. 1,2,3 4,5 (files in call<k>/)")
    ap.add_argument("--resumed", nargs="*", default=[], help="K=J: call K (a lease's first) began from call J's home")
    ap.add_argument("--terms", required=True, help="the W patch's TERMS (the ground truth's pick)")
    ap.add_argument("--groundtruth", type=Path, help="holdout_gt7.tar.gz: kept in OUT/groundtruth/")
    args = ap.parse_args()
    evidence, out = args.evidence, args.out
    calls = leases_layout(evidence, args.leases, args.resumed) if args.leases else calls_layout(evidence, args.calls)
    tmp = Path(tempfile.mkdtemp(prefix="holdout7-record-"))
    homes = {c.k: rec.extract(c.home, tmp / f"home{c.k}") for c in calls}
    nights = {c.k: rec.extract(c.nights, tmp / f"nights{c.k}") / f"nights_{TAG}" for c in calls}
    check_resumed(homes, calls)
    chains = branches(calls)
    for chain in chains:
        last = chain[-1].k
        assert (homes[last] / "nights.tsv").read_text() == (nights[last] / "nights.tsv").read_text(), last

    sha = {name: s for name, s in (line.split() for line in (nights[chains[0][-1].k] / "shas.txt").read_text()
                                   .splitlines()) if name in CODE}
    commit_of = {s: name for name, s in sha.items()}
    rows: list[dict] = []
    owns: list[set[int]] = []
    for i, chain in enumerate(chains):
        earlier = [homes[c[-1].k] / "artifacts" / "flaggems" for c in chains[:i]]
        before = {c.k for ch in chains[:i] for c in ch}
        mine, own = branch_rows(chain, homes[chain[-1].k], nights, commit_of, earlier, before)
        rows += mine
        owns.append(own)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rows.sort(key=lambda r: r["started_utc"])   # write_processes keeps this order (its sort is stable)
    paths = [(r["_folder"], r.pop("_art")) for r in rows]
    cols = [*rec3.COLS, "ab_interrupted"] + (["call"] if any(c.k != c.lease for c in calls) else [])
    rec.write_processes(rows, out, cols, stem_label="commit", files=rec3.FILES)
    folders = {r["seq"]: p for r, (p, _) in zip(rows, paths, strict=True)}
    art_of = {r["seq"]: a for r, (_, a) in zip(rows, paths, strict=True)}
    kept: dict[tuple[str, str], Path] = {}
    for chain in chains:   # the first branch's folders first: a later branch's same key reuses them
        art = homes[chain[-1].k] / "artifacts" / "flaggems"
        with_kernels = [r for r in rows if r["kernels"] != "-" and art_of[r["seq"]] == art]
        kept = rec3.write_caches(with_kernels, folders, art, out, kept=kept)
        rec3.check_caches(with_kernels, folders, kept, tmp)
    write_upstream(homes[chains[0][-1].k] / "mirrors" / "flaggems.git", sha, args.terms, out, tmp)
    for i, chain in enumerate(chains):
        dst = out if i == 0 else out / f"lease{chain[-1].lease}"
        home = homes[chain[-1].k]
        if i:
            write_upstream(home / "mirrors" / "flaggems.git", sha, args.terms, tmp / f"up{i}", tmp)
            assert rec5.same_tree(tmp / f"up{i}" / "upstream", out / "upstream"), "another branch's upstream differs"
        before = {c.k for ch in chains[:i] for c in ch}
        earlier = [(c.k, nights[c.k]) for c in chain[:-1] if c.k not in before]
        write_nights(nights[chain[-1].k], earlier, dst, owns[i], out if i else None)
        write_reports(home / "artifacts" / "flaggems", dst, owns[i])
        for c in chain:
            if c.output is not None and c.k not in before:
                rec.copy_text(c.output, dst / c.output.name)
    if args.groundtruth:
        write_groundtruth(args.groundtruth, out, tmp)

    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{len(rows)} processes ({sum(r['kind'] == 'night' for r in rows)} nightly shards) in {len(chains)} "
          f"branch(es), {len(kept)} kernel folders; {size / 1e6:.2f} MB written; {rec.scrubbed} identifier line(s) "
          "scrubbed")
    shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
