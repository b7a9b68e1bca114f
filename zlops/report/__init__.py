"""Rendering of a run's results: the text compare table, the markdown and HTML reports, trend plots
and the run's figures (:mod:`.figures`).

Everything here renders data (strings, PNG files); sending them anywhere is :mod:`zlops.slack.outbox`'s
job (:mod:`zlops.slack.announce` decides what). matplotlib is only imported when a plot is drawn.

May import: campaign, run, store, backends (the clock names), host, :mod:`zlops.alerts.lifecycle` and the
vocabulary; never judge, alerts' messages, slack or anything above (the layers in docs/design/layers.md;
tests/test_layers.py enforces them).
"""

from __future__ import annotations

from zlops.report.markdown import markdown_report
from zlops.report.plots import trend_plot
from zlops.report.table import compare_table

__all__ = ["compare_table", "markdown_report", "trend_plot"]
