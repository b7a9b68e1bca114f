"""From tonight's numbers and the baseline's to a verdict (docs/design/layers.md)."""
