#!/usr/bin/env bash
# All set-up, then the whole test suite: PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379 are
# used for real (ZLOPS_SKIP_POSTGRES=1 skips the PostgreSQL tests). How long it takes on a shared 2-core
# machine, with and without -m "not slow": docs/benchmarks.md (measured, with the load beside it).
# The tests run on every core (pytest-xdist, `-n auto --dist loadfile`: a file's tests on one worker); a test
# marked `serial` (replays at a scaled time, real timings) runs with nothing beside it (tests/conftest.py).
# ZLOPS_TEST_WORKERS=N sets the workers (0: one process, as `python -m pytest` runs); so does a -n of your own.
# Usage: scripts/test.sh [pytest options]
# Ends by printing where zlops was installed and how to put it on PATH (. .venv/bin/activate).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/path-hint.sh
ZLOPS_NO_PATH_HINT=1 bash scripts/bootstrap.sh airflow,test
trap zlops_path_hint EXIT
parallel=(-n "${ZLOPS_TEST_WORKERS:-auto}" --dist loadfile)
for arg in "$@"; do
  case "$arg" in
    -n|-n*|--numprocesses*|--dist*|no:xdist|-pno:xdist) parallel=() ;;
  esac
done
[ "${ZLOPS_TEST_WORKERS:-auto}" = 0 ] && parallel=()
.venv/bin/python -m pytest ${parallel[@]+"${parallel[@]}"} "$@"
