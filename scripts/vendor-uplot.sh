#!/usr/bin/env bash
# Vendor uPlot (MIT, https://github.com/leeoniya/uPlot) into the console's static files:
# the pinned release from the npm registry, checked against the sha256 of the tarball and
# of every vendored file, so that running this again gives the same bytes or fails.
# The console's own code has no build step; uPlot is one script and one stylesheet.
#
#   scripts/vendor-uplot.sh           # fetch, check, copy into src/logtrove/http/static/vendor/uplot
#   scripts/vendor-uplot.sh --check   # only check the vendored files against the pins
set -euo pipefail
VERSION=1.6.32
TARBALL_SHA256=4b8a8191e425658e3ea8c8c1314b0fc679c861ee3a1af2b20c7b16ba50b5133d
declare -A FILES=(
  [dist/uPlot.iife.min.js]=19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f
  [dist/uPlot.min.css]=df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04
  [LICENSE]=8f989229699b4fe2f1a0432d0e9edc338a8a911e250e2d1b01ecd770a5f5b1bd
)
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/src/logtrove/http/static/vendor/uplot"

check() {  # check <file> <sha256>
  echo "$2  $1" | sha256sum --check --quiet - || { echo "sha256 mismatch: $1" >&2; exit 1; }
}

if [ "${1:-}" = "--check" ]; then
  for f in "${!FILES[@]}"; do check "$DEST/$(basename "$f")" "${FILES[$f]}"; done
  echo "uPlot $VERSION: vendored files match their pins"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "uplot@$VERSION" >/dev/null)
check "$work/uplot-$VERSION.tgz" "$TARBALL_SHA256"
tar -xzf "$work/uplot-$VERSION.tgz" -C "$work"
mkdir -p "$DEST"
for f in "${!FILES[@]}"; do
  check "$work/package/$f" "${FILES[$f]}"
  cp "$work/package/$f" "$DEST/$(basename "$f")"
done
echo "$VERSION" > "$DEST/VERSION"
echo "uPlot $VERSION vendored into ${DEST#"$ROOT"/}"
