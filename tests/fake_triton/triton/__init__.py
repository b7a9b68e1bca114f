"""A stand-in for the ``triton`` package in tests without Triton: only ``triton.runtime.cache``.

tests/fake_triton goes on a benchmark process's PYTHONPATH; tests that have the real Triton
(``ZLOPS_TEST_TRITON_SITE``, tests/kernels/test_kernels_seed.py) run the same benchmark against it.
"""

__version__ = "3.6.0+fake"
