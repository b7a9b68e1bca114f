"""zlops: nightly performance-regression service for accelerator kernels and runtimes.

The core library imports without Airflow; Airflow glue lives in :mod:`zlops.airflow`.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
