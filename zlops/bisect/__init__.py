"""Bisection of a confirmed regression (docs/design/layers.md)."""
