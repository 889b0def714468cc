#!/usr/bin/env bash
# Makes sure PgBouncer (the transaction-pooler tests run it privately on a free port) is
# installed: Debian's package when we may install it, else says how to get it. The
# package's own service is left alone; the tests start their own instance.
set -euo pipefail

if [ -n "${INBOUND_PGBOUNCER:-}" ] || [ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing PgBouncer (Debian's package) for the pooler tests" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null
  exit 0
fi
echo "PgBouncer not found: install it (apt-get install pgbouncer) or set INBOUND_PGBOUNCER to its binary." >&2
exit 1
