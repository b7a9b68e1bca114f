#!/usr/bin/env bash
# All set-up, then the whole test suite: PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379 are
# used for real (ZLOPS_SKIP_POSTGRES=1 skips the PostgreSQL tests). How long it takes on a shared 2-core
# machine, with and without -m "not slow": docs/benchmarks.md (measured, with the load beside it).
# Usage: scripts/test.sh [pytest options]
# Ends by printing where zlops was installed and how to put it on PATH (. .venv/bin/activate).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/path-hint.sh
ZLOPS_NO_PATH_HINT=1 bash scripts/bootstrap.sh airflow,test
trap zlops_path_hint EXIT
.venv/bin/python -m pytest "$@"
