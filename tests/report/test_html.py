"""The HTML report: self-contained, escaped, figures referenced relative to the artifact folder."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser
from pathlib import Path

from report_factories import comparison, make_summary

from zlops.model import CompareSummary, RunRecord, ShardOutcome, Verdict
from zlops.report.html import html_report

EVIL = '<script>alert("x")</script>&co'


class _Tags(HTMLParser):
    """Collects start tags with their attributes and checks every non-void tag is closed."""

    VOID = frozenset({"meta", "img", "br", "hr", "link", "input"})

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[tuple[str, dict[str, str | None]]] = []
        self.open: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"</{tag}> closes {self.open[-1:]}"
        self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(text: str) -> _Tags:
    tags = _Tags()
    tags.feed(text)
    tags.close()
    assert tags.open == [], f"unclosed: {tags.open}"
    return tags


def _render(summary: CompareSummary, run: RunRecord, shards: list[ShardOutcome], tmp_path: Path) -> str:
    root = tmp_path / "artifacts"
    return html_report(summary, run=run, shards=shards, artifacts_root=root,
                       plots={("npu", "matmul_bf16", "latency"): root / "plots" / "npu matmul_bf16.png"},
                       overview=[("Paired ratio per case", root / "plots" / "run__ratio.png")],
                       alerts=["#1 matmul_bf16 (npu, latency): new regression (thread opened)"],
                       expected_pools=["cuda", "npu", "musa"],
                       telemetry={("npu", 0): {"backend": "cuda", "samples": 9, "sm_clock_median_mhz": 1980.0,
                                               "sm_clock_min_mhz": 345.0,
                                               "below_90pct_peak_share": 0.1, "temp_max_c": 49.0}})


def test_structure_figures_and_relative_paths(run: RunRecord, shards: list[ShardOutcome], tmp_path: Path) -> None:
    text = _render(make_summary(), run, shards, tmp_path)
    assert text.startswith("<!DOCTYPE html>")
    tags = _parse(text)
    images = [a["src"] for t, a in tags.starts if t == "img"]
    assert images == ["plots/run__ratio.png", "plots/npu%20matmul_bf16.png"]
    assert str(tmp_path) not in text  # everything relative to the artifact folder
    assert not [t for t, _ in tags.starts if t in ("script", "link", "iframe")]  # self-contained, no scripts
    assert not any((a.get("href") or a.get("src") or "").startswith(("http:", "https:", "//"))
                   for _, a in tags.starts)
    body = " ".join(tags.text)
    assert "Pools: 1 run, 1 invalid (cuda), 1 missing (musa)" in body
    assert "#1 matmul_bf16 (npu, latency): new regression (thread opened)" in body
    assert "SM clock 1980 MHz median" in body and "1 of 2 shards ok." in body
    rows = [a.get("class") for t, a in tags.starts if t == "tr" and a.get("class")]
    assert rows.count("regression") == 1 and rows.count("improved") == 1 and rows.count("missing") == 1


def test_everything_from_outside_is_escaped(run: RunRecord, shards: list[ShardOutcome], tmp_path: Path) -> None:
    summary = make_summary()
    evil = comparison("npu", EVIL, Verdict.REGRESSION, 1.0, 2.0)
    summary = dataclasses.replace(summary, suite="k<b>", comparisons=(*summary.comparisons, evil))
    bad_run = dataclasses.replace(run, branch='"><img src=x onerror=alert(1)>')
    bad_shards = [dataclasses.replace(shards[1], error=EVIL)]
    text = html_report(summary, run=bad_run, shards=bad_shards, alerts=[EVIL], overview=[(EVIL, tmp_path / "a.png")])
    assert "<script>" not in text and "onerror=alert(1)>" not in text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;co" in text
    tags = _parse(text)
    assert not [t for t, _ in tags.starts if t == "script"]
    assert [t for t, _ in tags.starts].count("img") == 1  # only the overview figure, none injected
    assert EVIL in " ".join(tags.text)  # the reader sees the name as it is


def test_nothing_to_show(run: RunRecord) -> None:
    text = html_report(CompareSummary("r", "kernels", run.sha, ()), run=run, shards=[])
    tags = _parse(text)
    body = " ".join(tags.text)
    assert "Nothing flagged." in body and "No comparisons." in body and "0 of 0 shards ok." in body
    assert not [t for t, _ in tags.starts if t == "img"]
