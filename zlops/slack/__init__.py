"""The one Slack gateway: the client, the outbox sender, and what a night says.

Owns delivering the outbox to Slack with one ``slack_sdk.WebClient`` factory (:mod:`.outbox`: posts,
thread replies, file uploads, retries, redaction), what a notifier leaves behind (:mod:`.notify`:
``NotifyResult``, ``slack_payload.json``), the night's summary as pure data (:mod:`.summary`) and the
report step's Slack side (:mod:`.announce`: the alert lifecycle's messages and threads, the summary).

May import: alerts, report, campaign (its scaling wording), store, config and the vocabulary. Never judge,
steps, triage, forge or airflow: those call it (the layers in docs/design/layers.md; tests/test_layers.py
enforces them).
"""
