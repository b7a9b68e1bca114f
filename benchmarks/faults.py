"""Run the fault matrix (benchmarks/fault_scenarios/) against real ``zlops nightly`` processes.

    python benchmarks/faults.py [--only GROUP|SCENARIO-SUBSTRING] [--keep DIR]

Each scenario builds its own fake upstream, config and home in a temporary folder, injects one
fault (a signal to zlops, two homes on one device, a FIFO as results, a full disk, a hostile git
transport) and checks what docs/faults.md promises. Prints one row per scenario and the totals:
faults survived / tried, measurements lost, duplicate rows, double-booked devices. The device
leases live in a fresh folder per invocation ($ZLOPS_LOCKS_DIR), shared by every scenario of it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from fault_scenarios import Outcome, discover  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="run the scenarios whose group or function name contains one of these "
                                   "(comma-separated)")
    ap.add_argument("--keep", help="keep every scenario's folder under this directory")
    args = ap.parse_args(argv)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="zlops-faults-"))
    root.mkdir(parents=True, exist_ok=True)
    os.environ["ZLOPS_LOCKS_DIR"] = str(root / "locks")
    wanted = [w for w in (args.only or "").split(",") if w]
    chosen = [s for s in discover() if not wanted or any(w in s.group or w in s.fn.__name__ for w in wanted)]
    rows = []
    for s in chosen:
        work = root / f"{s.group}-{s.fn.__name__}"
        work.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        try:
            out = s.fn(work)
        except Exception as exc:  # noqa: BLE001 - a scenario that crashes is a fault not survived
            out = Outcome(False, f"scenario raised {type(exc).__name__}: {exc}")
            traceback.print_exc()
        rows.append((s, out, time.monotonic() - start))
        mark = "skipped" if out.skipped else ("survived" if out.survived else "NOT SURVIVED")
        print(f"  {s.group}/{s.fn.__name__}: {mark} ({time.monotonic() - start:.1f} s)", file=sys.stderr, flush=True)
    print(render(rows))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    tried = [o for _, o, _ in rows if not o.skipped]
    return 0 if all(o.survived for o in tried) else 1


def render(rows: list[tuple[object, Outcome, float]]) -> str:
    head = ("| group | fault | survived | measurements lost | duplicate rows | double-booked | secrets shown | s "
            "| what happened |")
    lines = [head, "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for s, o, secs in rows:
        survived = "skipped" if o.skipped else ("yes" if o.survived else "**no**")
        detail = o.skipped or o.detail
        lines.append(f"| {s.group} | {s.name} | {survived} | {o.lost} | {o.duplicate_rows} "  # type: ignore[attr-defined]
                     f"| {o.double_booked} | {o.secrets} "
                     f"| {secs:.1f} | {detail.replace('|', '/')} |")
    tried = [o for _, o, _ in rows if not o.skipped]
    lines.append("")
    lines.append(f"faults survived: {sum(o.survived for o in tried)} / {len(tried)} tried"
                 f" ({len(rows) - len(tried)} skipped); measurements lost: {sum(o.lost for o in tried)}; "
                 f"duplicate rows: {sum(o.duplicate_rows for o in tried)}; "
                 f"double-booked devices: {sum(o.double_booked for o in tried)}; "
                 f"secrets printed or stored: {sum(o.secrets for o in tried)}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
