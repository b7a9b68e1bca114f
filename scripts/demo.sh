#!/usr/bin/env bash
# All set-up, then the demo: a scripted upstream and a week of nightlies on SQLite and a CPU pool.
# Usage: scripts/demo.sh [zlops demo options, e.g. --home DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/zlops demo "$@"
