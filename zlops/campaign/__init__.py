"""Collective campaigns: gang shards of one case on P devices (docs/design/layers.md)."""
