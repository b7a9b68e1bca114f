"""The run report as one self-contained HTML page (pure: values in, a string out).

Inline CSS, no scripts, nothing fetched from elsewhere; figures are ``<img>`` tags with paths relative
to ``artifacts_root`` so the page works from the artifact folder it is written into. Every piece of
text from the outside world (case names, errors, notes, branch names) is HTML-escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from zlops.model import CompareSummary, Comparison, RunRecord, ShardOutcome, ShardStatus, Verdict
from zlops.report import cells
from zlops.report.markdown import promotion_line, telemetry_line
from zlops.report.table import caliber_lines, row_cells

PlotKey = tuple[str, str, str]

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1200px;color:#222;
padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0}th,td{border:1px solid #ddd;padding:.25em .6em;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f4f4}
tr.severe td,tr.regression td{background:#fde2e1}tr.potential td,tr.suspect td{background:#fff1dc}
tr.improved td{background:#e3f6e3}tr.missing td,tr.failed td{background:#eee}
code{background:#f4f4f4;padding:0 .25em;border-radius:3px}.muted{color:#777}
.gallery{display:flex;flex-wrap:wrap;gap:1em}.gallery figure{margin:0;max-width:580px}
.gallery img,.flag img{max-width:100%;border:1px solid #ddd}figcaption{font-size:.9em;color:#555}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _src(path: Path, root: Path | None) -> str:
    p = PurePath(path)
    if root is not None and p.is_relative_to(PurePath(root)):
        p = p.relative_to(PurePath(root))
    return quote(p.as_posix())


def html_report(
    summary: CompareSummary,
    *,
    run: RunRecord,
    shards: Sequence[ShardOutcome],
    plots: Mapping[PlotKey, Path] | None = None,
    overview: Sequence[tuple[str, Path]] = (),
    thresholds: tuple[float, float] = (2.0, 5.0),
    artifacts_root: Path | None = None,
    telemetry: Mapping[tuple[str, int], Mapping[str, Any]] | None = None,
    alerts: Sequence[str] = (),
    expected_pools: Sequence[str] | None = None,
) -> str:
    """Render one run's report as HTML (pure and deterministic); see the module docstring.

    ``plots`` maps a series to its trend figure, ``overview`` lists the run-level figures,
    ``alerts`` the alert changes of the night as plain text lines.
    """
    plots = plots or {}
    potential_pct, regression_pct = thresholds
    ran, invalid, missing = cells.pool_status(shards, summary.comparisons, expected_pools)
    head = cells.short_sha(run.sha)
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(summary.suite)} @ {_e(head)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(summary.suite)} {_e(run.kind)} @ <code>{_e(head)}</code></h1>",
        "<ul>",
        (f"<li>Run: <code>{_e(run.run_key)}</code> on <code>{_e(run.branch)}</code>, "
        f"commit <code>{_e(run.sha)}</code></li>"),
        f"<li>{_e(cells.header_line(summary, None, None))}</li>",
        f"<li>Pools: {len(ran)} run{_pools(', {n} invalid', invalid)}{_pools(', {n} missing', missing)}</li>",
        f"<li><strong>{_e(summary.overall_line())}</strong></li>",
        *([f"<li>Baseline: {_e(promotion_line(run.meta['promotion']))}</li>"]
          if isinstance(run.meta.get("promotion"), dict) else []),  # zlops.promotion: whether and why
        "</ul>",
    ]
    if alerts:
        out += ["<h2>Alerts</h2>", "<ul>", *(f"<li>{_e(line)}</li>" for line in alerts), "</ul>"]
    if overview:
        out += ["<h2>Figures</h2>", '<div class="gallery">']
        out += [f'<figure><a href="{_src(p, artifacts_root)}"><img src="{_src(p, artifacts_root)}" '
                f'alt="{_e(title)}"></a><figcaption>{_e(title)}</figcaption></figure>' for title, p in overview]
        out.append("</div>")
    caliber = caliber_lines(summary.comparisons)
    if caliber:   # a caliber break is a wall: said before any delta
        out += ["<h2>Caliber</h2>", "<ul>", *(f"<li>{_e(line)}</li>" for line in caliber), "</ul>"]
    out += _flagged(summary, plots, artifacts_root)
    out += _comparison_tables(summary)
    reasons = cells.reason_lines(summary.comparisons)
    if reasons:
        out += ["<h2>Not decided or not judged</h2>", "<ul>", *(f"<li>{_e(r)}</li>" for r in reasons), "</ul>"]
    out += _shards(shards, artifacts_root)
    if telemetry:
        out += ["<h2>Telemetry</h2>", "<table><tr><th>Pool</th><th>Device</th><th>During the benchmark</th></tr>"]
        out += [f"<tr><td>{_e(pool)}</td><td class=num>{device}</td><td>{_e(telemetry_line(t))}</td></tr>"
                for (pool, device), t in sorted(telemetry.items())]
        out.append("</table>")
    out += [
        "<h2>Notes</h2>", "<ul>",
        (f"<li>Potential regression: worse than the baseline by more than {potential_pct:g}%; regression: "
        f"worse by more than {regression_pct:g}%; improved: better by more than {potential_pct:g}%.</li>"),
        ("<li>Base is what the verdict compared tonight with (named in the Reference column), HEAD tonight's "
         "value; Change (%) is (HEAD - Base) / Base of exactly these two; whether positive is worse depends on "
         "the metric (lower is better for times, higher for throughput).</li>"),
        "</ul>", "</body></html>", "",
    ]
    return "\n".join(out)


def _pools(fmt: str, pools: Sequence[str]) -> str:
    text = _e(fmt.format(n=len(pools)))
    return text + (f" ({_e(', '.join(pools))})" if pools else "")


def _flagged(summary: CompareSummary, plots: Mapping[PlotKey, Path], root: Path | None) -> list[str]:
    flagged = cells.flagged_order(summary.comparisons)
    flagged += [c for c in cells.sorted_comparisons(summary.comparisons)
                if c.verdict in (Verdict.SUSPECT, Verdict.SUSPECT_IMPROVED, Verdict.IMPROVED)]
    out = ["<h2>Flagged</h2>"]
    if not flagged:
        return [*out, "<p>Nothing flagged.</p>"]
    for c in flagged:
        change = cells.fmt_change(cells.change_pct(c))
        base = cells.fmt_value(c.base_value, cells.base_unit(c))
        head = cells.fmt_value(c.head_value, c.unit)
        out.append(f'<div class="flag"><h3>{_e(cells.marker(c.verdict))}: {_e(cells.series_name(c))}</h3>')
        out.append(f"<p>{_e(change)}: {_e(base)} → {_e(head)}"
                   + (f" (Base = {_e(cells.reference_text(c))})" if c.base or c.figures else "") + "</p>")
        if c.judgement.note:
            out.append(f'<p class="muted">{_e(c.judgement.note.strip().splitlines()[0])}</p>')
        plot = plots.get((c.pool, c.case, c.metric))
        if plot is not None:
            src = _src(plot, root)
            out.append(f'<a href="{src}"><img src="{src}" alt="trend of {_e(c.case)}" loading="lazy"></a>')
        out.append("</div>")
    return out


_TABLE_HEAD = ("<table><tr><th>Case</th><th>Metric</th><th>Base</th><th>HEAD</th><th>Delta</th><th>Change (%)</th>"
               "<th>Verdict</th><th>Reference</th></tr>")


def _comparison_tables(summary: CompareSummary) -> list[str]:
    """One table per pool, grouped by operator family, most urgent first (as the markdown report); a big
    pool gets one folding section per family, open when it holds something to read."""
    out = ["<h2>Comparison</h2>"]
    groups = cells.by_pool(summary.comparisons)
    if not groups:
        return [*out, "<p>No comparisons.</p>"]
    for pool, comparisons in groups.items():
        families = cells.family_groups(comparisons)
        out.append(f"<h3>{_e(pool)}</h3>")
        if len(comparisons) <= cells.GROUP_ROWS:
            out += [_TABLE_HEAD, *(_row(c) for g in families for c in g.rows), "</table>"]
            continue
        loud = sum(1 for g in families if not g.quiet)
        out.append(f"<p>{len(comparisons)} rows in {len(families)} operator families; {loud} with something to "
                   "read come first (open), the rest (every case unchanged) are folded.</p>")
        for g in families:
            out += [f"<details{'' if g.quiet else ' open'}><summary>{_e(g.summary())}</summary>", _TABLE_HEAD,
                    *(_row(c) for c in g.rows), "</table></details>"]
    return out


def _row(c: Comparison) -> str:
    case, base, head, delta, change, mark = row_cells(c, c.case)
    nums = "".join(f"<td class=num>{_e(v)}</td>" for v in (base, head, delta, change))
    return (f'<tr class="{c.verdict.value}"><td>{_e(case)}</td><td>{_e(c.metric)}</td>{nums}<td>{_e(mark)}</td>'
            f"<td>{_e(cells.reference_text(c))}</td></tr>")


def _shards(shards: Sequence[ShardOutcome], root: Path | None) -> list[str]:
    ok = sum(1 for s in shards if s.status is ShardStatus.OK)
    out = ["<h2>Shards</h2>", f"<p>{ok} of {len(shards)} shards ok.</p>"]
    if not shards:
        return out
    out.append("<table><tr><th>Pool</th><th>Device</th><th>Backend</th><th>Status</th><th>Error</th>"
               "<th>Artifacts</th></tr>")
    for s in sorted(shards, key=lambda s: (s.pool, s.device)):
        error = (s.error or "").strip().splitlines()[0][:200] if (s.error or "").strip() else ""
        status = _e(s.status.value) if s.status is ShardStatus.OK else f"<strong>{_e(s.status.value)}</strong>"
        out.append(f"<tr><td>{_e(s.pool)}</td><td class=num>{s.device}</td><td>{_e(s.backend)}</td>"
                   f"<td>{status}</td><td>{_e(error)}</td><td><code>{_e(_src(s.artifact_dir, root))}</code></td></tr>")
    out.append("</table>")
    return out
