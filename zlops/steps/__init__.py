"""The nightly's steps: one module per Airflow task, each task one call on a typed :class:`RunContext`.

=====================  ==========================================  ===============================================
Airflow task           call                                        module
=====================  ==========================================  ===============================================
``fetch``              :func:`zlops.steps.fetch.fetch_for_trigger`   mirror, resolve the commit, record the run
``env``                :func:`zlops.steps.prepare.env`               worktree + venv, tonight's partition plan
``run_<pool>_<dev>``   :func:`zlops.steps.run_device.run_device`     one benchmark process on one device
``ingest``             :func:`zlops.steps.ingest.ingest`             every planned shard has a stored record
``compare``            :func:`zlops.steps.compare.compare`           verdicts of every series (zlops.judge.evidence)
``confirm_<pool>``     :func:`zlops.steps.confirm.confirm_pool`      same-device A/B of the pool's suspects
``report``             :func:`zlops.steps.report.report`             tables, figures, alerts, Slack
``promote_baseline``   :func:`zlops.steps.promote.promote`           accept the run as a baseline (or not)
``cleanup``            :func:`zlops.steps.cleanup.cleanup`           remove the worktree
=====================  ==========================================  ===============================================

:mod:`zlops.steps.context` holds the run context (config, suite, run key, commit, devices) that every
step after fetch rebuilds from the store, so a task retried on another worker rebuilds what it needs;
it imports no step. ``zlops nightly`` (:func:`zlops.steps.nightly.run_nightly`) runs the same calls in one
process, and ``zlops rescore`` (:mod:`zlops.steps.rescore`) re-runs the compare step on a stored run.
Every step is idempotent for a given run key: a retried task updates rows, never adds them.

This package's ``__init__`` imports nothing, so a module that needs only the context (sharding,
campaigns, promotion) imports :mod:`zlops.steps.context` without loading the steps.

May import: every layer below (judge, slack, alerts, report, campaign, run, ...); only airflow, the demo and
the CLI import it. Three modules sit lower than the package: :mod:`zlops.steps.context` with run/,
:mod:`zlops.steps.prepare` and :mod:`zlops.steps.cleanup` below the judge, which reuses them for the A/B (the
layers in docs/design/layers.md; tests/test_layers.py enforces them).
"""
