"""Fault scenarios of issue 14, one module per group; each scenario returns a row (see services.Row)."""
