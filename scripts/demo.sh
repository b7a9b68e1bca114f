#!/usr/bin/env bash
# All set-up, then the demo: a scripted upstream and a week of nightlies on SQLite and a CPU pool.
# Usage: scripts/demo.sh [zlops demo options, e.g. --home DIR]
# Ends by printing where zlops was installed and how to put it on PATH (. .venv/bin/activate).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/path-hint.sh
ZLOPS_NO_PATH_HINT=1 bash scripts/bootstrap.sh
trap zlops_path_hint EXIT
.venv/bin/zlops demo "$@"
