"""Running a suite's shards on a pool's devices.

Owns the runner (:mod:`.runner`: one benchmark process on one device, telemetry beside it), which cases a
run measures (:mod:`.selection`), partitioned suites (:mod:`.sharding`, the LPT plan :mod:`.partition`),
idle devices (:mod:`.devices`), the way from a finished process to the values zlops keeps
(:mod:`.ingest`), a shard's artifact bundle (:mod:`.bundle`) and what a dead run left behind
(:mod:`.recovery`).

May import: :mod:`zlops.steps.context` (the run's handle, in this layer), store, config, backends, host,
formats, kernels and the vocabulary. Never campaign, judge, report or anything above (the layers in
docs/design/layers.md; tests/test_layers.py enforces them).
"""
