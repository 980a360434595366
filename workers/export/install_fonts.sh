#!/usr/bin/env bash
# The TrueType fonts of PDF reports (EXPORT_PDF_FONT, EXPORT_PDF_FONT_BOLD): DejaVu Sans from
# Debian's fonts-dejavu-core (without it PDF exports fall back to Helvetica, Latin-1 only), and
# the fallbacks of EXPORT_PDF_FALLBACK_FONTS for Chinese, Japanese (fonts-droid-fallback) and
# Korean (fonts-nanum).
# Idempotent and quiet: does nothing when the files are present.
#   bash workers/export/install_fonts.sh           install when missing (needs root + apt-get)
#   bash workers/export/install_fonts.sh --check   only report; exit 1 when missing
# Used by the test set-up (tests/workers/export/test_formats.py prints €, —, œ, ’ with it).
set -euo pipefail

PACKAGES=(fonts-dejavu-core fonts-droid-fallback fonts-nanum)
PACKAGE="${PACKAGES[*]}"
DIR=/usr/share/fonts/truetype
FILES=("$DIR/dejavu/DejaVuSans.ttf" "$DIR/dejavu/DejaVuSans-Bold.ttf"
       "$DIR/droid/DroidSansFallbackFull.ttf" "$DIR/nanum/NanumGothic.ttf")

present() {
    local f
    for f in "${FILES[@]}"; do [ -s "$f" ] || return 1; done
}

if present; then
    echo "PDF font: ${FILES[*]}"
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "a PDF font is missing: apt-get install -y $PACKAGE" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "a PDF font is missing and cannot be installed here (needs root and apt-get):" >&2
    echo "    sudo apt-get install -y $PACKAGE" >&2
    exit 1
fi
echo "installing $PACKAGE"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
present || { echo "$PACKAGE did not provide ${FILES[*]}" >&2; exit 1; }
echo "PDF font: ${FILES[*]}"
