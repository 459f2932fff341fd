#!/usr/bin/env bash
# The screenshot of a lineage's HTML report that README.md shows (docs/img/report.png):
#   bash docs/report_screenshot.sh LINEAGE [OUT.png]
# Writes the report from the store (mindforge report), then renders its first 1,800 pixels in
# Debian's headless chromium (apt-get install -y chromium; the test command installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
lineage="${1:?usage: docs/report_screenshot.sh LINEAGE [OUT.png]}"
out="${2:-docs/img/report.png}"
.venv/bin/mindforge report "$lineage" >/dev/null
page="$(pwd)/.mindforge/artifacts/reports/${lineage}.html"
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" \
  --screenshot="$(realpath -m "$out")" --window-size=1280,1800 "file://${page}" 2>/dev/null
echo "wrote $out from $page"
