"""What zlops does on the machine it runs on.

Owns the one subprocess gateway (:mod:`.proc`: argv lists, an allow-listed environment, its own process
group, a group kill), host-wide device leases (:mod:`.locks`), device telemetry beside every shard and its
files (:mod:`.telemetry`), what else runs beside a benchmark (:mod:`.contention`), git mirrors, commits and
worktrees (:mod:`.gitops`) and per-worktree uv environments (:mod:`.envs`).

May import: the vocabulary only (errors, model, metrics, redact, progress, safefiles, identity, stats). The
backends, the config and everything above build on it (the layers in docs/design/layers.md;
tests/test_layers.py enforces them).
"""
