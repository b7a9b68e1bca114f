"""The PR compare where the pull request lives: a check on its head commit, triggered from the forge.

- :mod:`zlops.forge.check`: what the check says (conclusion, title, the report's table of the changed
  series), pure;
- :mod:`zlops.forge.client`: the GitHub and GitLab REST calls (check runs, commit statuses, MR notes,
  permissions), on the standard library;
- :mod:`zlops.forge.deliver`: the check through the store's outbox, retried like Slack messages;
- :mod:`zlops.forge.webhook`: verify and answer the forge's webhook, trigger ``zlops_pr_compare``;
- :mod:`zlops.forge.receiver`: the FastAPI app (in the zlops Airflow plugin, or standalone).

Nothing here imports Airflow; its glue (connections, the DAG trigger) is zlops.airflow.forge.
See docs/forge.md.

May import: judge, the workspace steps, slack, report, run, store, config, backends, host and the vocabulary;
never airflow (the layers in docs/design/layers.md; tests/test_layers.py enforces them).
"""
