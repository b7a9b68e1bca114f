"""Copy what a campaign proof recorded into a test-data folder: ``record.py SOURCE DEST``.

SOURCE is the ``--home`` run_nights.py left, or the ``campaign_h200x2_n<N>.tar.gz`` it wrote (the last
night's holds every night). DEST gets, unedited: ``nights.json`` (the driver's verdict rows, with the
night's baseline, tonight's value and the A/B's per-run values), ``zlops.json`` (the config),
``night<N>-lane<L>.results.json`` (each lane's ``campaign_results.json``, as ingest parsed it),
``night<N>-lane<L>.campaign.json`` (each shard's devices, status, seconds) and ``night<N>.report.md``.
That is what ``tests/campaign/test_h200x2_noise_replay.py`` re-judges.
"""

from __future__ import annotations

import re
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path


def record(home: Path, dest: Path) -> list[str]:
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ("nights.json", "zlops.json"):
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
                shutil.copyfile(lane / src, dest / name)
                written.append(name)
        if (run_dir / "report.md").is_file():
            shutil.copyfile(run_dir / "report.md", dest / f"night{night}.report.md")
            written.append(f"night{night}.report.md")
    return written


def main() -> int:
    src, dest = Path(sys.argv[1]), Path(sys.argv[2])
    if src.is_file():
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(src) as tar:
            tar.extractall(tmp, filter="data")
            print("\n".join(record(Path(tmp) / "home", dest)))
    else:
        print("\n".join(record(src, dest)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
