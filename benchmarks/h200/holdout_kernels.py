"""The compiled kernels of the hold-out's cold processes, per commit, and which differ between commits.

Reads the Triton caches that ``flaggems_holdout_record.py --cold-cache-dir DIR`` left (``DIR/<label>``, one
empty cache per commit's first process) with zlops' own parser (``zlops.kernels.triton.parse_cache``: the
code hash without source locations) and prints one line per kernel and commit, then the kernels whose
compiled code differs between the first label and each other one. This is the ground truth for issue 25's
attribution: S (a wrapper change) must compile exactly A's kernels, K (a kernel-source change) must differ
from S in sum's non-inner kernel only.

    python3 benchmarks/h200/holdout_kernels.py DIR A S [K]
"""

from __future__ import annotations

import sys
from pathlib import Path

from zlops.kernels.triton import parse_cache


def main() -> int:
    root, labels = Path(sys.argv[1]), sys.argv[2:]
    sets = {}
    for label in labels:
        inv = parse_cache(root / label)
        sets[label] = {(k.name, k.code_hash, k.num_warps, k.num_stages) for k in inv.kernels}
        for k in sorted(inv.kernels, key=lambda k: (k.name, k.code_hash or "")):
            print(f"{label}\t{k.name}\t{(k.code_hash or '-')[:16]}\t{k.binary}\tnum_warps={k.num_warps}\t"
                  f"num_stages={k.num_stages}")
        print(f"{label}\t{len(inv.kernels)} kernels")
    first = labels[0]
    for label in labels[1:]:
        gone, new = sets[first] - sets[label], sets[label] - sets[first]
        print(f"{first} -> {label}: {len(gone)} kernel(s) only in {first}, {len(new)} only in {label}")
        for k in sorted(gone):
            print(f"  - {k[0]} {str(k[1])[:16]}")
        for k in sorted(new):
            print(f"  + {k[0]} {str(k[1])[:16]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
