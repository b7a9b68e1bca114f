"""What zlops does on the machine it runs on (docs/design/layers.md)."""
