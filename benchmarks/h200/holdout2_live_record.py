"""The second hold-out's live nights as a test record: what the device tool brought back, made small and text.

    python benchmarks/h200/holdout2_live_record.py CALL3_DIR CALL4_DIR OUT_DIR

CALL3_DIR / CALL4_DIR: the two device calls' files (``home_v2a.tar.gz``: zlops' home with its store and artifacts;
``nights_v2a.tar.gz``: each night's CLI output, report, ``json/nights.json``, ``verdicts.txt``; written by
benchmarks/h200/flaggems_holdout_nights.sh). Call 4's home holds every night (call 3's is its nights 1-2, checked
identical here). Writes into OUT_DIR (tests/data/flaggems_h200/holdout2_2026-12-02/live/):

- the nights' files as they came (``night<N>-<label>.txt``, ``.report.txt``, ``json/nights.json``, ``verdicts.txt``,
  ``nights.tsv``, ``shas.txt``, ``upstream_log.txt``, ``walls.txt``, ``zlops.yaml``, ``config_check.txt``,
  ``env_end.txt``; ``env_c3.txt`` / ``env_c4.txt``: each call's ``env.txt``), GPU identifiers scrubbed;
- ``processes.tsv``: one row per benchmark process zlops ran (every nightly shard, every A/B run whose folder
  survived), in start order: its night, commit label and sha, kind (``night`` / ``ab``), A/B side and folder,
  selection (the ``-m`` expression), ``wall_s`` (timing.json ``duration_s``: zlops' own timing of the process),
  ``first_gpu_s`` (seconds after the start of the first 1-s telemetry sample with a busy SM or >= 1 GiB on the
  device: an upper bound of the process's start-up, which zlops does not stamp), status, exit code, the manifest's
  kernels line, and its files under ``procs/`` (``flaggems_record.log``, ``kernels.json``, ``manifest.json``);
- ``upstream/``: ``src/flag_gems/ops/sum.py`` of A, S and K (``sum_<label>.py``), each one's own diff (``S.diff``:
  D1..S, ``K.diff``: S..K) and ``log.txt`` (sha, tree, subject), read from the mirror zlops fetched the nights
  from (the home's ``mirrors/flaggems.git``);
- ``triton_cache/<label>/``: each nightly shard's real Triton cache, keeping only what
  ``zlops.kernels.triton.parse_cache`` reads (``<kernel>.json``, ``__grp__<kernel>.json``, ``<kernel>.cubin``);
  the script checks that the kept files give the same inventory (names, cache keys, code hashes, launch metadata).

Nothing is edited but GPU identifiers (serials, UUIDs: none were found in this run's files; the count is printed).
"""

from __future__ import annotations

import csv
import filecmp
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

_GPU_UUID = re.compile(r"GPU-[0-9a-fA-F-]{8,}|MIG-[0-9a-fA-F-]{8,}")
_SECRET_LINE = re.compile(r"serial|uuid|board id|part number|\bpdi\b", re.I)
NIGHT_FILES = ("verdicts.txt", "nights.tsv", "shas.txt", "upstream_log.txt", "walls.txt", "zlops.yaml",
               "config_check.txt", "env_end.txt")
CACHE_KEEP = (".json", ".cubin")
PROC_FILES = (("flaggems_record.log", ".log", "log"), ("kernels.json", ".kernels.json", "kernels"),
              ("manifest.json", ".manifest.json", "manifest"))
COLS = ["seq", "night", "night_label", "label", "sha", "kind", "side", "folder", "selection", "wall_s", "first_gpu_s",
        "status", "rc", "started_utc", "ended_utc", "kernels_line", "log", "kernels", "manifest", "timing"]
scrubbed = 0


def scrub_text(text: str) -> str:
    """The text without lines naming a GPU serial/UUID and without GPU-... identifiers."""
    global scrubbed
    out = []
    for line in text.splitlines(keepends=True):
        if _SECRET_LINE.search(line):
            scrubbed += 1
            continue
        new = _GPU_UUID.sub("GPU-<removed>", line)
        scrubbed += new != line
        out.append(new)
    return "".join(out)


def copy_text(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(scrub_text(src.read_text()))


def extract(tarball: Path, into: Path) -> Path:
    into.mkdir(parents=True)
    with tarfile.open(tarball) as tar:
        tar.extractall(into, filter="data")
    return into


def selection(argv: list[str]) -> str:
    """The pytest ``-m`` expression (the last ``-m``: the first is ``python -m pytest``)."""
    at = [i for i, a in enumerate(argv) if a == "-m"]
    return argv[at[-1] + 1] if len(at) > 1 else "-"


def first_gpu_s(folder: Path, started: datetime) -> str:
    path = folder / "telemetry.csv"
    if not path.exists():
        return "-"
    for row in csv.DictReader(path.open()):
        if float(row["util_pct"] or 0) > 0 or float(row["mem_used_mib"] or 0) >= 1024:
            return f"{(datetime.fromisoformat(row['timestamp']) - started).total_seconds():.1f}"
    return "-"


def trim_cache(src: Path, dst: Path) -> None:
    for f in sorted(src.rglob("*")):
        if f.is_file() and not f.is_symlink() and f.suffix in CACHE_KEEP:
            t = dst / f.relative_to(src)
            t.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, t)


def same_inventory(a: Path, b: Path) -> bool:
    from zlops.kernels.triton import parse_cache

    def sig(path: Path) -> list[tuple[object, ...]]:
        inv = parse_cache(path)
        return sorted((k.name, k.cache_key, k.code_hash, k.binary, k.num_warps, k.num_stages, k.num_ctas, k.backend,
                       k.arch, k.shared, json.dumps(k.constants, sort_keys=True), k.compiler_version)
                      for k in inv.kernels)
    return sig(a) == sig(b) and len(sig(a)) > 0


def run_folders(art: Path) -> list[tuple[str, str, str, Path]]:
    """(run id, kind, A/B folder, folder) of every benchmark process under zlops' ``artifacts/<suite>/``: each
    nightly shard (``<run>/h200/0``, kind ``night``) and every A/B run (kind ``ab``: ``<run>/ab/h200/<NN><side>``,
    or ``<run>/ab/h200/<base sha12>/<NN><side>`` where the night's A/B is grouped by base commit)."""
    folders = []
    for run_dir in sorted(art.glob("nightly_flaggems_n*")):
        if "_ab-base" in run_dir.name:
            continue
        rid = run_dir.name[len("nightly_flaggems_"):].rsplit("-", 1)[0]
        folders.append((rid, "night", "-", run_dir / "h200" / "0"))
        ab = run_dir / "ab" / "h200"
        folders += [(rid, "ab", m.parent.relative_to(ab).as_posix(), m.parent)
                    for m in sorted(ab.rglob("manifest.json"))]
    return folders


def process_row(rid: str, kind: str, ab: str, folder: Path, runs: dict[str, list[str]],
                label_of: dict[str, str]) -> dict[str, Any]:
    """One processes.tsv row (``_folder``: the process's folder) from its manifest and timing.json; ``runs``:
    nights.tsv by run id, ``label_of``: commit sha -> label."""
    m = json.loads((folder / "manifest.json").read_text())
    started = datetime.fromisoformat(m["started_at"])
    timing = json.loads((folder / "timing.json").read_text()) if (folder / "timing.json").exists() else {}
    return {"night": runs[rid][0], "night_label": runs[rid][1], "label": label_of[m["commit"]],
            "sha": m["commit"], "kind": kind, "side": ab[-1] if kind == "ab" else "-",
            "folder": f"{rid}/{'h200/0' if kind == 'night' else 'ab/h200/' + ab}",
            "selection": selection(m["argv"]),
            "wall_s": f"{timing['duration_s']:.2f}" if "duration_s" in timing else "-",
            "first_gpu_s": first_gpu_s(folder, started), "status": m["status"],
            "rc": "-" if m.get("exit_code") is None else str(m["exit_code"]),
            "started_utc": m["started_at"][:19] + "Z",
            "ended_utc": (m.get("ended_at") or "-")[:19] + ("Z" if m.get("ended_at") else ""),
            "kernels_line": m.get("kernels") or "-", "_folder": folder}


def write_processes(rows: list[dict[str, Any]], out: Path, cols: list[str], *, stem_label: str,
                    files: tuple[tuple[str, str, str], ...]) -> None:
    """``out/processes.tsv`` (``cols``) and each process's ``files`` (source name, suffix, column) under
    ``out/procs/<seq>_n<night>_<night|abNN{A,B}>_<row[stem_label]><suffix>``, in start order."""
    rows.sort(key=lambda r: r["started_utc"])
    procs = out / "procs"
    procs.mkdir(exist_ok=True)
    for seq, r in enumerate(rows, 1):
        folder = r.pop("_folder")
        side = "night" if r["kind"] == "night" else "ab" + r["folder"].rsplit("/", 1)[-1]
        stem = f"{seq:03d}_n{r['night']}_{side}_{r[stem_label]}"
        r["seq"] = str(seq)
        for src, suffix, key in files:
            if (folder / src).exists():
                copy_text(folder / src, procs / (stem + suffix))
                r[key] = f"procs/{stem}{suffix}"
            else:
                r[key] = "-"
        r.setdefault("timing", "-")   # zlops stamps no per-test times (the ground truth's processes have them)
    with (out / "processes.tsv").open("w") as fh:
        fh.write("\t".join(cols) + "\n")
        for r in rows:
            fh.write("\t".join(r[c] for c in cols) + "\n")


def main() -> int:
    call3, call4, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    tmp = Path(tempfile.mkdtemp(prefix="holdout2-record-"))
    home3 = extract(call3 / "home_v2a.tar.gz", tmp / "home3")
    home = extract(call4 / "home_v2a.tar.gz", tmp / "home4")
    nights3 = extract(call3 / "nights_v2a.tar.gz", tmp / "nights3") / "nights_v2a"
    nights = extract(call4 / "nights_v2a.tar.gz", tmp / "nights4") / "nights_v2a"
    art, art3 = home / "artifacts" / "flaggems", home3 / "artifacts" / "flaggems"
    for run in sorted(art3.iterdir()):   # call 4 resumed call 3's home: its nights must be the same files
        cmp = filecmp.dircmp(run, art / run.name)
        assert not (cmp.diff_files or cmp.left_only), f"call 3's {run.name} differs in call 4's home"
    out.mkdir(parents=True, exist_ok=True)

    for f in sorted(nights.glob("night*.txt")):
        copy_text(f, out / f.name)
    for name in NIGHT_FILES:
        copy_text(nights / name, out / name)
    copy_text(nights3 / "env.txt", out / "env_c3.txt")
    copy_text(nights / "env.txt", out / "env_c4.txt")
    copy_text(nights / "json" / "nights.json", out / "json" / "nights.json")

    label_of = {sha: label for label, sha in (line.split() for line in (nights / "shas.txt").read_text().splitlines())}
    runs = {line.split("\t")[3]: line.split("\t") for line in (nights / "nights.tsv").read_text().splitlines()}
    folders = run_folders(art)
    rows = [process_row(rid, kind, ab, folder, runs, label_of) for rid, kind, ab, folder in folders]
    write_processes(rows, out, COLS, stem_label="label", files=PROC_FILES)

    mirror = home / "mirrors" / "flaggems.git"
    sha = {label: s for s, label in label_of.items()}
    up = out / "upstream"
    up.mkdir(exist_ok=True)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(mirror), *args], check=True, capture_output=True, text=True).stdout
    for label in ("A", "S", "K"):
        (up / f"sum_{label}.py").write_text(git("show", f"{sha[label]}:src/flag_gems/ops/sum.py"))
    (up / "S.diff").write_text(git("diff", sha["S"] + "~1", sha["S"]))
    (up / "K.diff").write_text(git("diff", sha["K"] + "~1", sha["K"]))
    (up / "log.txt").write_text(git("log", "--format=%H %T %s", sha["K"]))

    for rid, kind, _, folder in folders:
        if kind != "night":
            continue
        label = runs[rid][1]
        dst = out / "triton_cache" / label
        trim_cache(folder / "triton_cache", dst)
        ok = same_inventory(folder / "triton_cache", dst)
        print(f"triton cache of {rid}: {sum(1 for _ in dst.iterdir())} folders kept, same inventory as the "
              f"whole cache: {ok}")
        assert ok
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{len(rows)} processes; {size / 1e6:.2f} MB in {out}; {scrubbed} identifier line(s) scrubbed")
    shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
