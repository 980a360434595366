#!/usr/bin/env bash
# Real typeset PDFs for the doc tests, from Debian packages: bash-doc's bash.pdf (the bash manual
# page set by groff: justified text with line-end hyphenation, which PDFium reports as U+FFFE).
# Idempotent and quiet: does nothing when the files are present.
#   bash workers/doc/install_test_pdfs.sh           install when missing (needs root + apt-get)
#   bash workers/doc/install_test_pdfs.sh --check   only report; exit 1 when missing
# Used by the test set-up (tests/workers/doc/test_typeset.py reads the file; it does not skip).
set -euo pipefail

PACKAGE=bash-doc
FILE=/usr/share/doc/bash/bash.pdf

if [ -s "$FILE" ]; then
    echo "test PDFs: $FILE"
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "$FILE is missing: apt-get install -y $PACKAGE" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "$FILE is missing and cannot be installed here (needs root and apt-get):" >&2
    echo "    sudo apt-get install -y $PACKAGE" >&2
    exit 1
fi
echo "installing $PACKAGE"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "$PACKAGE" >/dev/null
if [ ! -s "$FILE" ]; then
    # Slim images exclude /usr/share/doc from installs (dpkg path-exclude): take the file from
    # the package itself.
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$PACKAGE" >/dev/null)
    dpkg-deb --fsys-tarfile "$tmp"/"$PACKAGE"_*.deb | tar -x -C "$tmp" ./usr/share/doc/
    found="$(find "$tmp/usr/share/doc" -type f -name bash.pdf -size +0 | head -n1)"
    [ -n "$found" ] || { echo "$PACKAGE has no bash.pdf" >&2; exit 1; }
    install -D -m 0644 "$found" "$FILE"
fi
echo "test PDFs: $FILE"
