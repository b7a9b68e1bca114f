"""The regression alert: its lifecycle and what it says (docs/design/layers.md)."""
