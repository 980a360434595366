#!/usr/bin/env bash
# Tesseract OCR with French and English data for the doc worker (Debian packages).
# Idempotent and quiet: does nothing when `tesseract` and its fra/eng data are present.
#   bash workers/doc/install_tesseract.sh           install when missing (needs root + apt-get)
#   bash workers/doc/install_tesseract.sh --check   only report; exit 1 when missing
# Used by .ci/run and by `make run`.
set -euo pipefail

PACKAGES=(tesseract-ocr tesseract-ocr-fra tesseract-ocr-eng)

present() {
    command -v tesseract >/dev/null 2>&1 || return 1
    local langs
    langs="$(tesseract --list-langs 2>/dev/null)" || return 1
    grep -qx fra <<<"$langs" && grep -qx eng <<<"$langs"
}

if present; then
    echo "tesseract: $(tesseract --version 2>&1 | head -n1) (fra, eng)"
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "tesseract with fra+eng data is missing: apt-get install -y ${PACKAGES[*]}" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "tesseract is missing and cannot be installed here (needs root and apt-get):" >&2
    echo "    sudo apt-get install -y ${PACKAGES[*]}" >&2
    exit 1
fi
echo "installing ${PACKAGES[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
present || { echo "tesseract install did not provide fra+eng data" >&2; exit 1; }
echo "tesseract: $(tesseract --version 2>&1 | head -n1) (fra, eng)"
