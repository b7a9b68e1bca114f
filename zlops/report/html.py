"""The run report as one self-contained HTML page (pure: values in, a string out).

Inline CSS, no scripts, nothing fetched from elsewhere; figures are ``<img>`` tags with paths relative
to ``artifacts_root`` so the page works from the artifact folder it is written into. The page is the
jinja2 template ``templates/report.html`` with autoescape on: every piece of text from the outside world
(case names, errors, notes, branch names) is HTML-escaped; this module only gathers the values, each
formatted by :mod:`zlops.report.cells` as the text and markdown reports format it.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from zlops.model import CompareSummary, RunRecord, ShardOutcome, ShardStatus, Verdict
from zlops.report import cells
from zlops.report.markdown import class_notes, promotion_line, telemetry_line
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


class _Escaped(str):
    """A value as the report escapes it: :func:`html.escape` with quotes (``&quot;``, ``&#x27;``)."""

    def __html__(self) -> str:
        return html.escape(str(self), quote=True)


def _finalize(value: Any) -> Any:
    # every {{ value }} goes through here before autoescape: escaped by the stdlib's rules, the entities the
    # report always wrote; markup the template itself marks safe (the CSS) passes unchanged
    return value if hasattr(value, "__html__") else _Escaped("" if value is None else value)


@lru_cache(maxsize=1)
def _template() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("zlops.report", "templates"), autoescape=True,
                             finalize=_finalize, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True)
    return env.get_template("report.html")


def _src(path: Path, root: Path | None) -> str:
    p = PurePath(path)
    if root is not None and p.is_relative_to(PurePath(root)):
        p = p.relative_to(PurePath(root))
    return quote(p.as_posix())


def _pools_text(fmt: str, pools: Sequence[str]) -> str:
    return fmt.format(n=len(pools)) + (f" ({', '.join(pools)})" if pools else "")


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
    judge: str = "simple",
    canary: Sequence[str] = (),
    coverage: Sequence[str] = (),
) -> str:
    """Render one run's report as HTML (pure and deterministic); see the module docstring.

    ``plots`` maps a series to its trend figure, ``overview`` lists the run-level figures,
    ``alerts`` the alert changes of the night as plain text lines, ``canary`` the recall canary's lines
    (zlops.judge.canary), ``coverage`` the night's coverage lines (zlops.judge.coverage.pool_lines).
    """
    import markupsafe

    plots = plots or {}
    potential_pct, regression_pct = thresholds
    ran, invalid, missing = cells.pool_status(shards, summary.comparisons, expected_pools)
    promotion = run.meta.get("promotion")
    return str(_template().render(
        css=markupsafe.Markup(_CSS), suite=summary.suite, head=cells.short_sha(run.sha), run=run,
        header=cells.header_line(summary, None, None), ran=ran, invalid=invalid, missing=missing,
        pools_text=_pools_text, overall=summary.overall_line(),
        promotion=promotion_line(promotion) if isinstance(promotion, dict) else None,  # zlops.judge.promotion
        alerts=list(alerts), canary=list(canary), coverage=list(coverage),
        overview=[(title, _src(p, artifacts_root)) for title, p in overview],
        caliber=caliber_lines(summary.comparisons),  # a caliber break is a wall: said before any delta
        flagged=flagged_items(summary, plots, artifacts_root), tables=comparison_tables(summary),
        reasons=cells.reason_lines(summary.comparisons), shards=_shards(shards, artifacts_root),
        shards_ok=sum(1 for s in shards if s.status is ShardStatus.OK),
        telemetry=[(pool, device, telemetry_line(t)) for (pool, device), t in sorted((telemetry or {}).items())],
        potential_pct=potential_pct, regression_pct=regression_pct,
        class_notes=[line.removeprefix("- ").replace("`", "") for line in class_notes(judge, potential_pct,
                                                                                       regression_pct)]))


def flagged_items(summary: CompareSummary, plots: Mapping[PlotKey, Path] | None = None,
                  root: Path | None = None) -> list[dict[str, Any]]:
    """The flagged (then suspect and improved) series of the report, worst first, each as its cells
    (:mod:`zlops.report.cells`) with its series key (``pool``, ``case``, ``metric``): the report's
    "Flagged" section and the run page print these."""
    plots = plots or {}
    flagged = cells.flagged_order(summary.comparisons)
    flagged += [c for c in cells.sorted_comparisons(summary.comparisons)
                if c.verdict in (Verdict.SUSPECT, Verdict.SUSPECT_IMPROVED, Verdict.IMPROVED)]
    out = []
    for c in flagged:
        plot = plots.get((c.pool, c.case, c.metric))
        out.append({"marker": cells.marker(c.verdict), "name": cells.series_name(c), "pool": c.pool, "case": c.case,
                    "metric": c.metric, "css": c.verdict.value,
                    "change": cells.fmt_change(cells.change_pct(c)),
                    "base": cells.fmt_value(c.base_value, cells.base_unit(c)),
                    "head": cells.fmt_value(c.head_value, c.unit),
                    "reference": cells.reference_text(c) if c.base or c.figures else None,
                    "note": c.judgement.note.strip().splitlines()[0] if c.judgement.note else "",
                    "plot": None if plot is None else _src(plot, root)})
    return out


def comparison_tables(summary: CompareSummary) -> list[dict[str, Any]]:
    """One table per pool, grouped by operator family, most urgent first (as the markdown report); a big
    pool (more than ``cells.GROUP_ROWS`` rows) gets one folding section per family, open when it holds
    something to read. Each row is the text table's cells (:func:`zlops.report.table.row_cells`) with its
    series key (the table's ``pool``, the row's ``case`` and ``metric``): the report's "Comparison" and
    the run page's table print these, so both show the same figures."""
    out = []
    for pool, comparisons in cells.by_pool(summary.comparisons).items():
        families = cells.family_groups(comparisons)
        groups = []
        for g in families:
            rows = []
            for c in g.rows:
                case, base, head, delta, change, mark = row_cells(c, c.case)
                rows.append({"css": c.verdict.value, "case": case, "metric": c.metric,
                             "numbers": (base, head, delta, change), "mark": mark,
                             "reference": cells.reference_text(c)})
            groups.append({"summary": g.summary(), "quiet": g.quiet, "rows": rows})
        out.append({"pool": pool, "n": len(comparisons), "fold": len(comparisons) > cells.GROUP_ROWS,
                    "loud": sum(1 for g in families if not g.quiet), "groups": groups})
    return out


def _shards(shards: Sequence[ShardOutcome], root: Path | None) -> list[dict[str, Any]]:
    out = []
    for s in sorted(shards, key=lambda s: (s.pool, s.device)):
        error = (s.error or "").strip().splitlines()[0][:200] if (s.error or "").strip() else ""
        out.append({"pool": s.pool, "device": s.device, "backend": s.backend, "status": s.status.value,
                    "ok": s.status is ShardStatus.OK, "error": error, "artifacts": _src(s.artifact_dir, root)})
    return out
