"""The regression alert: how it lives, what it says, which kernels explain it.

Owns the lifecycle (:mod:`.lifecycle`: which series open, confirm, worsen or fix an alert tonight; pure),
the Slack messages of that lifecycle (:mod:`.messages`: a regression's first message, its thread
replies; pure) and the kernel attribution of an alert (:mod:`.explain`, read from the store).

May import: report, campaign (its scaling wording), store, config, kernels and the vocabulary.
:mod:`.lifecycle` imports only the vocabulary and sits in the bottom layer: the store keeps alert states (the
layers in docs/design/layers.md; tests/test_layers.py enforces them).
"""
