#!/usr/bin/env bash
# The offline query cache under .sqlx/: every `sqlx::query!`-family statement, checked
# against the schema that migrations/ (and the example's) build.
#
#   scripts/sqlx-prepare.sh          rewrites .sqlx/ (commit it with the SQL it describes)
#   scripts/sqlx-prepare.sh --check  fails when .sqlx/ is missing a statement, holds one
#                                    no code uses any more, or describes it differently
#
# Builds never need a database: the sqlx.toml of each crate with statements points its
# macros at INBOUND_SQLX_DATABASE_URL, set only here, so a DATABASE_URL in the environment (the
# tests export one) is never read by them.
# Here a scratch database is migrated with sqlx-cli from the migration files alone
# (building inboundctl to migrate would need the very cache being made), and
# `cargo sqlx prepare` compiles the workspace against it with the tables' schema first on
# the search_path, as every inbound session has it.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=()
case "${1:-}" in
  "") ;;
  --check) mode=(--check) ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

if ! command -v sqlx >/dev/null 2>&1 || ! sqlx --version | grep -q ' 0\.9\.'; then
  echo "sqlx-cli 0.9 not found: cargo install sqlx-cli --version 0.9.0 --locked --no-default-features --features postgres,rustls" >&2
  exit 1
fi

# sqlx 0.9 reads a crate's sqlx.toml from that crate's directory alone
# (vendor/sqlx-core/src/config/mod.rs), so there is no workspace-wide one. The query
# macros are used by two crates only: inbound-store (all of inbound's SQL) and
# inbound-example (its reference domain), each with its sqlx.toml reading a database only
# from INBOUND_SQLX_DATABASE_URL; without one, the DATABASE_URL the tests export would be
# what its statements are checked against. A macro anywhere else fails here.
macro_users=$(grep -rlE --include='*.rs' 'query(_as|_scalar)?(_file(_as|_scalar)?)?(_unchecked)?!\(' \
  crates tests examples | sed -E 's#/(src|tests|benches|examples)/.*##' | sort -u)
for crate in $macro_users; do
  case "$crate" in
    crates/store | crates/example) ;;
    *) echo "$crate uses sqlx's query macros: inbound's SQL belongs in crates/store" >&2; exit 1 ;;
  esac
done
for crate in crates/store crates/example; do
  if [ ! -f "$crate/sqlx.toml" ]; then
    echo "$crate/sqlx.toml is missing: its macros would read DATABASE_URL" >&2
    exit 1
  fi
done

server_url="$(scripts/ensure-postgres.sh)"
# A database of this run's own, dropped at exit: two runs never share one.
scratch="inbound_sqlx_prepare_$$"
# The same server and credentials, another database; `options` puts inbound's schema
# first, as sessions do (crates/store/src/session.rs).
url_for() {
  python3 - "$server_url" "$1" "$2" <<'PY'
import sys, urllib.parse as u
url, database, search_path = sys.argv[1:]
parts = u.urlsplit(url)
query = [(k, v) for k, v in u.parse_qsl(parts.query) if k != "options"]
if search_path:
    query.append(("options", f"-c search_path={search_path}"))
print(u.urlunsplit(parts._replace(path="/" + database, query=u.urlencode(query, quote_via=u.quote))))
PY
}

log=$(mktemp)
cleanup() {
  rm -f "$log"
  psql -w -Atq -d "$server_url" -c "DROP DATABASE IF EXISTS $scratch WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT
psql -w -Atq -v ON_ERROR_STOP=1 -d "$server_url" -c "CREATE DATABASE $scratch" >/dev/null
psql -w -Atq -v ON_ERROR_STOP=1 -d "$(url_for "$scratch" "")" \
  -c "CREATE SCHEMA inbound" -c "CREATE SCHEMA inbound_example" >/dev/null
sqlx migrate run --source migrations --database-url "$(url_for "$scratch" inbound)" >/dev/null
sqlx migrate run --source crates/example/migrations \
  --database-url "$(url_for "$scratch" inbound_example)" >/dev/null

scratch_url="$(url_for "$scratch" inbound)"
if ! DATABASE_URL="$scratch_url" INBOUND_SQLX_DATABASE_URL="$scratch_url" \
  cargo sqlx prepare --workspace "${mode[@]}" -- --workspace --all-targets \
  --features inbound-runtime/failpoints 2>&1 | tee "$log"; then
  [ ${#mode[@]} -eq 0 ] || echo ".sqlx/ is stale: run scripts/sqlx-prepare.sh and commit .sqlx/" >&2
  exit 1
fi
# sqlx only warns about a cached statement no code runs any more; stale is stale.
if grep -q "potentially unused queries" "$log"; then
  echo ".sqlx/ holds statements no code uses: run scripts/sqlx-prepare.sh and commit .sqlx/" >&2
  exit 1
fi
