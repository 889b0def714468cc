#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers at DATABASE_URL (default: the local trust-auth
# cluster on 127.0.0.1:5432). Starts the local cluster when it is installed but stopped;
# otherwise says how to get one. Exits non-zero when no server answers.
set -euo pipefail

url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"

answers() {
  pg_isready -q -d "$url" >/dev/null 2>&1
}

if ! command -v pg_isready >/dev/null 2>&1; then
  echo "pg_isready not found: install PostgreSQL (apt-get install postgresql) or its client tools." >&2
  exit 1
fi

answers && exit 0

if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  for version in $(ls /etc/postgresql | sort -V); do
    echo "starting the local PostgreSQL $version cluster" >&2
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  done
  for _ in $(seq 1 30); do
    answers && exit 0
    sleep 1
  done
fi

cat >&2 <<MSG
PostgreSQL does not answer at $url.
Either set DATABASE_URL to a server you have, or install and start one:
  apt-get update && apt-get install -y postgresql
  pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start
MSG
exit 1
