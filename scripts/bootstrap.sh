#!/usr/bin/env bash
# Create .venv (python3 -m venv), put uv in it, and install zlops with the given extras.
# Usage: scripts/bootstrap.sh [EXTRAS]     e.g. scripts/bootstrap.sh airflow,test
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check uv
spec="."
[ -n "$extras" ] && spec=".[$extras]"
.venv/bin/uv pip install --quiet --python .venv/bin/python -e "$spec"
if [ -z "${ZLOPS_NO_PATH_HINT:-}" ]; then  # demo.sh and test.sh print it at their end instead
  . scripts/path-hint.sh
  zlops_path_hint
fi
