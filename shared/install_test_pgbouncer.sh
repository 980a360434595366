#!/usr/bin/env bash
# PgBouncer (Debian package) for the transaction-pooling tests (.ci/pgbouncer-tests).
# Idempotent and quiet: does nothing when `pgbouncer` is on the PATH or in /usr/sbin.
#   bash shared/install_test_pgbouncer.sh           install when missing (needs root + apt-get)
#   bash shared/install_test_pgbouncer.sh --check   only report; exit 1 when missing
# Only the binary is used: the tests start a private instance (tests/support/pgbouncer.py);
# the package's own system service is stopped and disabled when the install started it.
set -euo pipefail

PACKAGES=(pgbouncer)

binary() {
    command -v pgbouncer 2>/dev/null || { [ -x /usr/sbin/pgbouncer ] && echo /usr/sbin/pgbouncer; }
}

version() { "$(binary)" --version 2>/dev/null | head -n1; }

if binary >/dev/null; then
    echo "pgbouncer: $(version)"
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "pgbouncer is missing: apt-get install -y ${PACKAGES[*]}" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "pgbouncer is missing and cannot be installed here (needs root and apt-get):" >&2
    echo "    sudo apt-get install -y ${PACKAGES[*]}" >&2
    exit 1
fi
echo "installing ${PACKAGES[*]}"
export DEBIAN_FRONTEND=noninteractive
# No system service started by the package (policy-rc.d 101 = action forbidden) when none exists.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
fi
trap '[ "$made_policy" = 1 ] && rm -f "$policy"' EXIT
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
binary >/dev/null || { echo "the pgbouncer package did not provide the binary" >&2; exit 1; }
echo "pgbouncer: $(version)"
