"""The data behind the triage pages and the digest (docs/design/layers.md)."""
