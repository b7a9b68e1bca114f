#!/usr/bin/env bash
# The zlops a hold-out 6 call runs on the device: a FIXED commit's zlops/, sql/ and pyproject.toml (`git archive`),
# not the working tree the device tool copies (others edit it while the nights run), in .devcarry/zlops_src with
# ZLOPS_COMMIT naming the commit; holdout6_call.sh imports zlops from there (ZLOPS_SRC).
#   bash benchmarks/h200/holdout6_zlops_src.sh COMMIT [DEST]
set -euo pipefail
COMMIT=$(git rev-parse --verify "$1^{commit}")
DEST=${2:-.devcarry/zlops_src}
rm -rf "$DEST" && mkdir -p "$DEST"
git archive "$COMMIT" zlops sql pyproject.toml | tar -x -C "$DEST"
echo "$COMMIT" > "$DEST/ZLOPS_COMMIT"
echo "zlops $COMMIT in $DEST ($(du -sh "$DEST" | cut -f1))"
