#!/usr/bin/env bash
# All set-up, then the whole test suite (PostgreSQL on 127.0.0.1:5432 is used for real).
# Usage: scripts/test.sh [pytest options]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh airflow,test
exec .venv/bin/python -m pytest "$@"
