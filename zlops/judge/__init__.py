"""From tonight's numbers and the baseline's to a verdict.

Owns the judging setup of a run (:mod:`.setup`: built once from the config, stored with the run), the
judges (:mod:`.judges`, over :mod:`zlops.stats`), the comparison of a run with its baselines
(:mod:`.compare`, :mod:`.derived`), the evidence the verdicts stand on (:mod:`.evidence`), the
confirmation of suspects by an interleaved same-device A/B (:mod:`.confirm`, its budget :mod:`.budget`,
the pairs :mod:`.interleave`), paired nights (:mod:`.paired`), ``zlops ab`` over two bundle sets
(:mod:`.ab`) and which run becomes the baseline (:mod:`.promotion`).

May import: report, the workspace steps (:mod:`zlops.steps.prepare`, :mod:`zlops.steps.cleanup`), campaign,
run and :mod:`zlops.steps.context`, store, config, backends, host, formats, kernels and the vocabulary;
:mod:`zlops.stats` stays pure below it. Never alerts, bisect, slack, triage, forge, the other steps, airflow
or the CLI. :mod:`zlops.campaign.ab` (the campaign side of the A/B) sits in this layer (the layers in
docs/design/layers.md; tests/test_layers.py enforces them).
"""
