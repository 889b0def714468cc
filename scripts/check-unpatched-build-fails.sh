#!/usr/bin/env bash
# A workspace that depends on inbound without copying the two `[patch.crates-io]` lines
# must fail to build, not run on the unpatched sqlx (crates/store/src/lib.rs, "The patched
# sqlx"; vendor/README.md says what each patch does). This builds inbound-store as such a
# workspace would — a path dependency, no patch — and checks that it fails on the marker.
# Needs the registry (crates.io's sqlx-core and sqlx-postgres 0.9.1).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/team/src"
cat >"$work/team/Cargo.toml" <<TOML
[package]
name = "team-without-the-patch"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
inbound-store = { path = "$root/crates/store" }
TOML
echo 'fn main() {}' >"$work/team/src/main.rs"
# Inbound's lock pins the versions a team would get; the build runs on its own target dir.
cp Cargo.lock "$work/team/Cargo.lock"
log="$work/build.log"
if (cd "$work/team" && CARGO_TARGET_DIR="$work/target" SQLX_OFFLINE=true cargo check -q >"$log" 2>&1); then
  echo "inbound-store built without the [patch.crates-io] lines: the marker no longer holds" >&2
  exit 1
fi
for marker in PATCHED_FOR_INBOUND_ONE_BATCH_UNNAMED PATCHED_FOR_INBOUND_TCP_KEEPALIVE; do
  if ! grep -q "$marker" "$log"; then
    echo "the build without the patch failed, but not on $marker:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
done
echo "without the [patch.crates-io] lines inbound-store fails to build, naming both patches"
