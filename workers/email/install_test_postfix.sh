#!/usr/bin/env bash
# Postfix (and postgrey) for the email tests and bench: a real MTA the tests run as a private
# instance (own config and queue under a temp dir, loopback port; tests/workers/email/postfix.py).
# Idempotent and quiet: does nothing when `postfix` and `postgrey` are present. The system
# instance is configured "No configuration" and left stopped: nothing listens on port 25.
#   bash workers/email/install_test_postfix.sh           install when missing (needs root + apt-get)
#   bash workers/email/install_test_postfix.sh --check   only report; exit 1 when missing
set -euo pipefail

PACKAGES=(postfix postgrey)

present() {
    command -v postconf >/dev/null 2>&1 || [ -x /usr/sbin/postconf ] || return 1
    [ -x /usr/sbin/postfix ] && [ -x /usr/sbin/postgrey ]
}

version() {
    /usr/sbin/postconf -d mail_version 2>/dev/null | sed 's/.*= //'
}

if present; then
    echo "postfix: $(version), postgrey present"
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "postfix/postgrey missing: apt-get install -y ${PACKAGES[*]}" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "postfix is missing and cannot be installed here (needs root and apt-get):" >&2
    echo "    sudo apt-get install -y ${PACKAGES[*]}" >&2
    exit 1
fi
echo "installing ${PACKAGES[*]}"
export DEBIAN_FRONTEND=noninteractive
echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
apt-get update -qq
# policy-rc.d 101: the packages' postinst must not start the system daemons.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    created_policy=1
fi
trap '[ "$created_policy" = 1 ] && rm -f "$policy"' EXIT
apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
present || { echo "postfix install did not provide postfix/postgrey" >&2; exit 1; }
echo "postfix: $(version), postgrey present"
