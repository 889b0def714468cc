#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers *and accepts our credentials*, and prints the URL
# to use on stdout (everything else goes to stderr). `pg_isready` does not authenticate,
# so a password error is caught here, not minutes later in a test.
#
# - DATABASE_URL set: that server, as given. Nothing is created; a refusal is an error.
# - Otherwise the local cluster on 127.0.0.1:$INBOUND_LOCAL_PGPORT (default 5432), started
#   when it is installed but stopped:
#   - it trusts password-less TCP (as on these build machines): postgres@127.0.0.1;
#   - it has Debian's stock authentication since PostgreSQL 14 (peer on the socket,
#     scram-sha-256 over TCP): a local development role `inbound_dev` with a generated
#     password is made through the local socket as the postgres OS user, and its URL is
#     kept in .env.local (LOCAL_DATABASE_URL, mode 600) for the next run. The role is a
#     superuser of that local cluster, as `postgres` is: the tests create databases and roles.
# INBOUND_ENV_FILE and INBOUND_LOCAL_PGSOCKET (default /var/run/postgresql) override the
# file and the socket directory (the set-up test runs this against a scratch cluster).
set -euo pipefail
cd "$(dirname "$0")/.."

env_file="${INBOUND_ENV_FILE:-.env.local}"
port="${INBOUND_LOCAL_PGPORT:-5432}"
socket_dir="${INBOUND_LOCAL_PGSOCKET:-/var/run/postgresql}"
dev_role=inbound_dev
error_file=$(mktemp)
trap 'rm -f "$error_file"' EXIT

if ! command -v pg_isready >/dev/null 2>&1; then
  echo "pg_isready not found: install PostgreSQL (apt-get install postgresql) or its client tools." >&2
  exit 1
fi

# The URL without its password, for messages.
shown() { sed -E 's#(://[^:/@]+):[^@]*@#\1:***@#' <<<"$1"; }

answers() { pg_isready -q -d "$1" >/dev/null 2>&1; }

# Accepted: the server let us in (a database that does not exist yet still proves the
# credentials: `make run` creates its own).
authenticates() {
  PGCONNECT_TIMEOUT=5 psql -w -Atq -d "$1" -c 'SELECT 1' >/dev/null 2>"$error_file" && return 0
  grep -qE 'database "[^"]*" does not exist' "$error_file"
}

# Starts the installed clusters when nothing answers at $1, then waits for it.
wait_for_server() {
  answers "$1" && return 0
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    for main in $(printf '%s\n' /etc/postgresql/*/main | sort -V); do
      [ -d "$main" ] || continue
      version=$(basename "$(dirname "$main")")
      echo "starting the local PostgreSQL $version cluster" >&2
      # Its messages ("Removed stale pid file.") must not reach stdout: that is the URL.
      pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 2>/dev/null || true
    done
    for _ in $(seq 1 30); do
      answers "$1" && return 0
      sleep 1
    done
  fi
  cat >&2 <<MSG
PostgreSQL does not answer at $(shown "$1").
Either set DATABASE_URL to a server you have, or install and start one:
  apt-get update && apt-get install -y postgresql
  pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start
MSG
  exit 1
}

# Runs a command as the postgres OS user (peer authentication on the local socket).
as_postgres() {
  if [ "$(id -un)" = postgres ]; then
    "$@"
  elif [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo -n -u postgres -- "$@"
  else
    return 1
  fi
}

stored_url() {
  [ -f "$env_file" ] || return 0
  sed -n 's/^LOCAL_DATABASE_URL=//p' "$env_file" | tail -n 1
}

remember_url() {
  if [ ! -f "$env_file" ]; then
    echo "# Local development settings, made by 'make run' / 'make test'. Not for production." >"$env_file"
  fi
  chmod 600 "$env_file"
  local kept
  kept=$(grep -v '^LOCAL_DATABASE_URL=' "$env_file" || true)
  printf '%s\nLOCAL_DATABASE_URL=%s\n' "$kept" "$1" >"$env_file"
}

if [ -n "${DATABASE_URL:-}" ]; then
  wait_for_server "$DATABASE_URL"
  if ! authenticates "$DATABASE_URL"; then
    echo "PostgreSQL at $(shown "$DATABASE_URL") (DATABASE_URL) answers but refuses the connection:" >&2
    cat "$error_file" >&2
    exit 1
  fi
  echo "$DATABASE_URL"
  exit 0
fi

trust_url="postgres://postgres@127.0.0.1:$port/postgres"
wait_for_server "$trust_url"
remembered=$(stored_url)
# Only for this cluster: a URL kept for another port is not reused.
case "$remembered" in
  *"@127.0.0.1:$port/"*) ;;
  *) remembered= ;;
esac
if [ -n "$remembered" ] && authenticates "$remembered"; then
  echo "$remembered"
  exit 0
fi
if authenticates "$trust_url"; then
  echo "$trust_url"
  exit 0
fi

echo "PostgreSQL on 127.0.0.1:$port asks for a password (Debian's default); making the local role $dev_role" >&2
password=$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
sql="DO \$\$ BEGIN
  IF EXISTS (SELECT FROM pg_roles WHERE rolname = '$dev_role') THEN
    ALTER ROLE $dev_role WITH LOGIN SUPERUSER PASSWORD '$password';
  ELSE
    CREATE ROLE $dev_role WITH LOGIN SUPERUSER PASSWORD '$password';
  END IF;
END \$\$"
# On stdin, not the command line: a password in argv shows in `ps` and in sudo's log.
if ! as_postgres psql -w -q -h "$socket_dir" -p "$port" -d postgres -v ON_ERROR_STOP=1 \
    >/dev/null 2>"$error_file" <<<"$sql"; then
  cat >&2 <<MSG
Could not reach the local cluster as the postgres OS user through $socket_dir:
$(cat "$error_file")
Run this as a database superuser, then put the URL in $env_file (or export DATABASE_URL):
  CREATE ROLE $dev_role WITH LOGIN SUPERUSER PASSWORD '<password>';
  LOCAL_DATABASE_URL=postgres://$dev_role:<password>@127.0.0.1:$port/postgres
MSG
  exit 1
fi
url="postgres://$dev_role:$password@127.0.0.1:$port/postgres"
if ! authenticates "$url"; then
  echo "the local cluster refuses the new role $dev_role over TCP (check pg_hba.conf):" >&2
  cat "$error_file" >&2
  exit 1
fi
remember_url "$url"
echo "kept the local database URL in $env_file (LOCAL_DATABASE_URL)" >&2
echo "$url"
