"""Running benchmark shards on devices, and everything a run needs on the host (docs/design/layers.md)."""
