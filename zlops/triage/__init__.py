"""The data behind the triage pages and the digest, as plain values read from the store (no drawing).

Owns a person's change of an alert and the inbox (:mod:`.actions`: one code path for ``zlops alert`` and
the Airflow pages), the series and cross-backend pages (:mod:`.series`), a night's pages
(:mod:`.night`) and the trust ledger behind ``zlops digest`` (:mod:`.trust`).

May import: slack, alerts, judge (coverage, the recall canary), report, run, store, config and the vocabulary.
The pages that draw these values are :mod:`zlops.airflow`'s (the layers in docs/design/layers.md;
tests/test_layers.py enforces them).
"""
