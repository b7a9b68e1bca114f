#!/usr/bin/env bash
# The first-parent range of issue 16's H200 bisection proof, made reproducibly from the trimmed FlagGems
# bundle (tests/data/flaggems_h200/PROVENANCE.md): fixed authors and dates, so the SHAs are the same on
# every machine (tests/data/flaggems_h200/bisect/PROVENANCE.md lists them).
#
#   bash benchmarks/h200/bisect_range.sh BUNDLE DEST
#
# DEST's master: A (the bundle's master~2) -> B (master~1, README) -> 4 docs-only commits -> the bundle's
# "abs: compute twice" (cherry-picked) -> 2 docs-only commits. Prints "position sha subject" per commit.
set -euo pipefail
BUNDLE=$1
DEST=$2
git clone -q "$BUNDLE" "$DEST"
cd "$DEST"
export GIT_AUTHOR_NAME=zlops GIT_AUTHOR_EMAIL=zlops@example.invalid
export GIT_COMMITTER_NAME=zlops GIT_COMMITTER_EMAIL=zlops@example.invalid
C=$(git rev-parse master)
git checkout -q -B master master~1          # B (docs) on top of A
docs() {  # one docs-only commit at a fixed date
  export GIT_AUTHOR_DATE="2026-12-01T00:0$1:00+00:00" GIT_COMMITTER_DATE="2026-12-01T00:0$1:00+00:00"
  mkdir -p docs/bisect-proof
  echo "note $1: a documentation-only change (zlops bisection proof range)" > "docs/bisect-proof/note$1.md"
  git add "docs/bisect-proof/note$1.md"
  git commit -q -m "docs: bisection proof note $1"
}
docs 2; docs 3; docs 4; docs 5
unset GIT_AUTHOR_DATE                                   # the author and author date stay C's
export GIT_COMMITTER_DATE="2026-12-01T00:06:00+00:00"
git cherry-pick "$C" > /dev/null
docs 7; docs 8
i=0
for sha in $(git rev-list --first-parent --reverse master~8..master | sed '1i'"$(git rev-parse master~8)"); do
  echo "$i $sha $(git log -1 --format=%s "$sha")"
  i=$((i+1))
done
