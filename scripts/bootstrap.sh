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
# uv writes no .pyc, and where PYTHONDONTWRITEBYTECODE is set no process would: compile once what the
# zlops commands load, or every `zlops` compiles SQLAlchemy, pydantic... from source (seconds per start)
.venv/bin/python scripts/compile_bytecode.py || echo "byte-code not written: zlops commands start slower"
if [ -z "${ZLOPS_NO_PATH_HINT:-}" ]; then  # demo.sh and test.sh print it at their end instead
  . scripts/path-hint.sh
  zlops_path_hint
fi
