"""Copy what a campaign proof recorded into a test-data folder: ``record.py SOURCE DEST``.

SOURCE is the ``--home`` run_nights.py left, or the ``campaign_h200x2_n<N>.tar.gz`` it wrote (the last
night's holds every night). DEST gets, unedited: ``nights.json`` (the driver's verdict rows, with the
night's baseline, tonight's value and the A/B's per-run values), ``zlops.json`` (the config),
``night<N>-lane<L>.results.json`` (each lane's ``campaign_results.json``, as ingest parsed it),
``night<N>-lane<L>.campaign.json`` (each shard's devices, status, seconds) and ``night<N>.report.md``.
That is what ``tests/campaign/test_h200x2_noise_replay.py`` re-judges.

``--compact`` (the gloo record under the production defaults, tests/data/campaign_gloo_cpu_defaults/):
the JSON files are written without indentation, only the last night's report is kept, and a night
of ``nights.json`` without the commit's subject gets it from the upstream beside ``--home``
(``../collectives-upstream``).

``--comparisons`` also writes ``night<N>.comparisons.json``: every comparison row of the night's run as
the store keeps it (``zlops.store.comparisons``: figures with the A/B's CI and runs, the levels), so a test
can apply today's post-judging rules (``zlops.judge.derived.follow_sources``) to what the night judged.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


def _subjects(home: Path, nights: list[dict]) -> None:
    upstream = home.parent / "collectives-upstream"
    for night in nights:
        if "subject" not in night and upstream.is_dir():
            night["subject"] = subprocess.run(["git", "-C", str(upstream), "log", "-1", "--format=%s", night["sha"]],
                                              check=True, capture_output=True, text=True).stdout.strip()


def record(home: Path, dest: Path, *, compact: bool = False) -> list[str]:
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ("nights.json", "zlops.json"):
        if compact:
            data = json.loads((home / name).read_text())
            if name == "nights.json":
                _subjects(home, data)
            (dest / name).write_text(json.dumps(data, separators=(",", ":")) + "\n")
        else:
            shutil.copyfile(home / name, dest / name)
        written.append(name)
    for run_dir in sorted((home / "artifacts").glob("*/nightly_*_n*-*")):
        m = re.search(r"_n(\d+)-[0-9a-f]+$", run_dir.name)
        if m is None:   # an A/B's base-side run folder (nightly_..._n2_ab-base-...) holds no lanes
            continue
        night = int(m.group(1))
        for lane in sorted(p for p in (run_dir).glob("*/*") if (p / "campaign_results.json").is_file()):
            for src, kind in (("campaign_results.json", "results"), ("campaign.json", "campaign")):
                name = f"night{night}-lane{lane.name}.{kind}.json"
                if compact:
                    text = json.dumps(json.loads((lane / src).read_text()), separators=(",", ":"))
                    (dest / name).write_text(text + "\n")
                else:
                    shutil.copyfile(lane / src, dest / name)
                written.append(name)
        if (run_dir / "report.md").is_file():
            shutil.copyfile(run_dir / "report.md", dest / f"night{night}.report.md")
            written.append(f"night{night}.report.md")
    if compact:   # the last night's report only
        reports = sorted(dest.glob("night*.report.md"), key=lambda p: int(re.findall(r"\d+", p.name)[0]))
        for old in reports[:-1]:
            old.unlink()
            written.remove(old.name)
    return written


def record_comparisons(home: Path, dest: Path) -> list[str]:
    """``night<N>.comparisons.json`` for every nightly run of the store under ``home`` (its config's home is
    rewritten to ``home``: the tarball was made elsewhere). Needs zlops importable."""
    from zlops.config.settings import parse_config
    from zlops.steps.context import open_store
    from zlops.store.comparisons import _row

    data = json.loads((home / "zlops.json").read_text())
    old = data["home"]
    data = json.loads(json.dumps(data).replace(old, str(home)))
    store = open_store(parse_config(data, source="record"))
    written = []
    for run in store.list_runs(limit=10_000):
        m = re.search(r":n(\d+)$", run.run_key)   # run_nights.py's run label n<N>
        if m is None:
            continue
        rows = [{k: v for k, v in _row(0, c).items() if k != "run_id"} for c in store.comparisons(run.run_key)]
        name = f"night{int(m.group(1))}.comparisons.json"
        (dest / name).write_text(json.dumps({"run_key": run.run_key, "suite": run.suite, "rows": rows},
                                            separators=(",", ":")) + "\n")
        written.append(name)
    return written


def main() -> int:
    flags = {"--compact", "--comparisons"}
    compact, comps = "--compact" in sys.argv[1:], "--comparisons" in sys.argv[1:]
    src, dest = (Path(a) for a in [a for a in sys.argv[1:] if a not in flags][:2])
    if src.is_file():
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(src) as tar:
            tar.extractall(tmp, filter="data")
            print("\n".join(record(Path(tmp) / "home", dest, compact=compact)))
            if comps:
                print("\n".join(record_comparisons(Path(tmp) / "home", dest)))
    else:
        print("\n".join(record(src, dest, compact=compact)))
        if comps:
            print("\n".join(record_comparisons(src, dest)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
