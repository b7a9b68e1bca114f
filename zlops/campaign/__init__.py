"""Collective campaigns: shards of one case on P devices at once (docs/campaigns.md).

Owns tonight's gang plan over a pool (:mod:`.plan`), running it lane by lane with its derived series
(:mod:`.run`), the strong-scaling and stack-ratio series and their wording (:mod:`.scaling`), and the
same-gang A/B of a campaign's suspects (:mod:`.ab`).

May import: run and :mod:`zlops.steps.context`, store, config, backends, host and the vocabulary. :mod:`.ab`
sits one layer up, with the judge, and also imports :mod:`zlops.judge.budget`; the rest of the judge imports
:mod:`.plan` and :mod:`.ab`, never the other way round (the layers in docs/design/layers.md;
tests/test_layers.py enforces them).
"""
