"""The second hold-out's ground truth, per case: the latency of every recorded fresh process of each commit.

    python benchmarks/h200/holdout2_groundtruth_summary.py \
        tests/data/flaggems_h200/holdout2_2026-12-02/groundtruth/pairs

Reads the FlagGems record logs (``<seq>_<kind>_<label>.log``) of one recording folder and prints, per case, each
label's median latency (ms), its range over the processes, the change of the second label against the first
(medians) and whether the two ranges overlap ("apart": every process of one commit is slower than every
process of the other). This is how the slowed shape was chosen as ground truth before zlops saw any night.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def latencies(folder: Path) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(op, shape) -> label -> the latency of each process, in seq order."""
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for log in sorted(folder.glob("*.log")):
        parts = log.stem.split("_")
        if len(parts) != 3 or log.name == "driver.txt":
            continue
        label = parts[2]
        for line in log.read_text().splitlines():
            if not line.startswith("[INFO] {"):
                continue
            rec = json.loads(line[len("[INFO] "):])
            for res in rec["result"]:
                key = (rec["op_name"], "x".join(str(d) for d in res["shape_detail"][0]))
                out.setdefault(key, {}).setdefault(label, []).append(float(res["latency"]))
    return out


def main() -> int:
    folder = Path(sys.argv[1])
    table = latencies(folder)
    print(f"{'op':6s} {'shape':16s} {'label':5s} {'n':>2s} {'median ms':>10s} {'range ms':>21s}   change")
    for (op, shape), by_label in sorted(table.items()):
        labels = sorted(by_label)
        first = by_label[labels[0]]
        for label in labels:
            v = by_label[label]
            med = statistics.median(v)
            line = f"{op:6s} {shape:16s} {label:5s} {len(v):2d} {med:10.5f} [{min(v):9.5f}, {max(v):9.5f}]"
            if label != labels[0]:
                apart = max(v) < min(first) or min(v) > max(first)
                line += f"   {100 * (med / statistics.median(first) - 1):+7.2f}%{'  apart' if apart else ''}"
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
