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
