#!/usr/bin/env bash
# `make lint`: squawk over every migration (.squawk.toml says how it is configured). A
# `-- no-transaction` migration is checked as what it is, outside a transaction.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v squawk >/dev/null 2>&1 || { echo "squawk not found: python3 -m pip install squawk-cli" >&2; exit 1; }
transactional=()
outside=()
for file in migrations/*.sql crates/example/migrations/*.sql; do
  if head -n 1 "$file" | grep -q '^-- no-transaction'; then outside+=("$file"); else transactional+=("$file"); fi
done
status=0
if [ "${#transactional[@]}" -gt 0 ]; then
  squawk --config .squawk.toml --reporter gcc "${transactional[@]}" || status=1
fi
if [ "${#outside[@]}" -gt 0 ]; then
  squawk --config .squawk.toml --no-assume-in-transaction --reporter gcc "${outside[@]}" || status=1
fi
exit "$status"
