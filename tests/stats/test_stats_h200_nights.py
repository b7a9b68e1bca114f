"""Six real nights of FlagGems through zlops on an H200, replayed through the judge on CPU (issue 11).

The values are the HEAD column of the reports zlops wrote on the device
(tests/data/flaggems_h200/nights_2026-11-30/, PROVENANCE.md there): one benchmark process a night,
nights A, A, A, B (README only), C (abs does its work twice), C again. Each night is judged as the
nightly judges it: the earlier nights are its history (all were accepted), tonight's value its sample.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from zlops.judge.judges import noise_judge
from zlops.model import Thresholds, Verdict
from zlops.stats import Policy

ROOT = Path(__file__).resolve().parents[1] / "data" / "flaggems_h200"
#: two recordings of the same six nights on fresh H200 machines (PROVENANCE.md in each)
RECORDINGS = ("nights_2026-11-30", "nights_2026-11-30b")
LABELS = ["A", "A", "A", "B", "C", "C"]
LOUD = {Verdict.IMPROVED, Verdict.POTENTIAL, Verdict.REGRESSION, Verdict.SEVERE}
_ROW = re.compile(r"^(?P<case>\S.*?)?\s*\((?P<metric>[a-z_]+)\)\s+(?P<rest>.*)$")


def _values(path: Path) -> dict[tuple[str, str], tuple[float, bool]]:
    """(case, metric) -> (HEAD value, lower is better) of one report's table."""
    out: dict[tuple[str, str], tuple[float, bool]] = {}
    case = ""
    for line in path.read_text().splitlines():
        m = _ROW.match(line)
        if not m or line.startswith(("Case", "---", "Baseline", "Suite")):
            continue
        case = (m["case"] or "").strip() or case
        cells = re.split(r"\s{2,}", m["rest"].strip())
        head = cells[1]   # Case | Base | HEAD | ... (Base is "-" on night 0, where every series is new)
        number = re.match(r"[-+0-9.e]+", head)
        if head == "-" or not number:
            continue
        out[(case, m["metric"])] = (float(number.group(0)), m["metric"] not in ("speedup", "tflops"))
    return out


@pytest.fixture(scope="module", params=RECORDINGS)
def nights(request: pytest.FixtureRequest) -> list[dict[tuple[str, str], tuple[float, bool]]]:
    return [_values(ROOT / request.param / f"night{i}-{label}.report.txt") for i, label in enumerate(LABELS)]


def test_the_reports_hold_every_series_every_night(nights: list[dict[tuple[str, str], tuple[float, bool]]]) -> None:
    assert all(len(n) == 95 for n in nights)
    c = nights[4][("abs/float16/(1073741824)", "latency")][0] / nights[3][("abs/float16/(1073741824)", "latency")][0]
    assert c == pytest.approx(2.0, rel=0.01)   # the injected 2x is in the data


def test_the_real_h200_nights_judged_quiet_until_abs_doubles(
        nights: list[dict[tuple[str, str], tuple[float, bool]]]) -> None:
    loud: dict[int, list[tuple[str, str, str]]] = {}
    for t in range(1, len(nights)):
        for key, (value, lower) in nights[t].items():
            history = [n[key][0] for n in nights[:t] if key in n]
            j = noise_judge([history[-1]], [value], lower, Thresholds(), history=history, policy=Policy())
            if j.verdict in LOUD:
                loud.setdefault(t, []).append((key[0], key[1], j.verdict.value))
    # unchanged (1, 2), docs only (3), and every series abs' change does not touch (4, 5): nothing loud;
    # torch's own 4096x4096 kernels moved +3.2-3.6% for two processes: too few processes to confirm
    assert not loud.get(1) and not loud.get(2) and not loud.get(3)
    assert not [x for x in loud.get(4, []) if not x[0].startswith("abs/")]
    assert not [x for x in loud.get(5, []) if not x[0].startswith("abs/") or x[1] == "latency_base"]
    # abs doing twice the work on its 1G-element shapes: a suspect on both C nights (+100%, every metric),
    # never confirmed by nights alone: four earlier processes are too few to know the series' process
    # levels (issue 22; min_nights = 6), so it waits for the A/B, which the nightly runs for top suspects
    for shape in ("(1073741824)", "(1024x1024x1024)"):
        for metric in ("latency", "speedup", "tflops"):
            key = (f"abs/float16/{shape}", metric)
            for t in (4, 5):
                value, lower = nights[t][key]
                history = [n[key][0] for n in nights[:t]]
                j = noise_judge([history[-1]], [value], lower, Thresholds(), history=history, policy=Policy())
                assert j.verdict is Verdict.SUSPECT and j.worse_pct is not None and 95 < j.worse_pct < 105, j.note
                assert "awaiting an A/B" in j.note and (t == 4 or "too few for nights alone" in j.note), j.note
