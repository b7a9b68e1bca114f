"""tests/data holds recorded inputs, never tests.

It includes a pytest-benchmark suite that exists only to regenerate fixtures
(pytest_benchmark/PROVENANCE.md); zlops' own test run must not collect it.
"""

collect_ignore_glob = ["*"]
