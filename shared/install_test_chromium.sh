#!/usr/bin/env bash
# Headless Chromium for the operator console's browser tests (tests/console/, Playwright for
# Python drives the system browser at /usr/bin/chromium; `playwright install` is never used).
# Idempotent and quiet: does nothing when /usr/bin/chromium is present and starts.
#   bash shared/install_test_chromium.sh           install when missing (needs root + apt-get)
#   bash shared/install_test_chromium.sh --check   only report; exit 1 when missing
# Run by `make prereqs` (so by `make test` and .ci/run).
set -euo pipefail

PACKAGES=(chromium fonts-dejavu-core)
BROWSER=/usr/bin/chromium

present() {
    [ -x "$BROWSER" ] && "$BROWSER" --headless --no-sandbox --version >/dev/null 2>&1
}

if present; then
    echo "chromium: $("$BROWSER" --headless --no-sandbox --version 2>/dev/null | head -n1)"
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "chromium is missing: apt-get install -y ${PACKAGES[*]}" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium is missing and cannot be installed here (needs root and apt-get):" >&2
    echo "    sudo apt-get install -y ${PACKAGES[*]}" >&2
    exit 1
fi
echo "installing ${PACKAGES[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
present || { echo "chromium was installed but does not start" >&2; exit 1; }
echo "chromium: $("$BROWSER" --headless --no-sandbox --version 2>/dev/null | head -n1)"
