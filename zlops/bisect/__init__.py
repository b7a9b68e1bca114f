"""Bisection of a confirmed regression (docs/bisect.md).

Owns the search itself (:mod:`.search`: no git, no store, no devices; pure), what a bisection says
(:mod:`.messages`: the reply in the alert's thread, the lines of ``zlops alert show``) and running one on
the alert's pool (:mod:`.run`: ``zlops bisect ALERT_ID`` and the ``zlops_bisect`` DAG).

May import: judge (each step's A/B), the workspace steps, report, alerts, run and :mod:`zlops.steps.context`,
store, config, backends, kernels, host and the vocabulary. :mod:`.search` imports only the vocabulary and sits
in the bottom layer: the config and the store use its values (the layers in docs/design/layers.md;
tests/test_layers.py enforces them).
"""
