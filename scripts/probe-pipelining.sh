#!/usr/bin/env bash
# Would pipelining the ingress's commits pay? Runs scripts/probe-pipelining (its own
# workspace: it needs tokio-postgres, since sqlx cannot pipeline) against a fresh migrated
# database: the ingress's group-commit statement on one connection with 1, 2 and 3
# statements in flight, and on two connections, with 16 receipts per statement and (where
# statements share arrivals, as they would in the ingress) with 8, in alternating rounds.
# Not part of `make bench` (BENCHMARKS.md records a run); needs release binaries
# (`make release`).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench-lib.sh
trap bench_cleanup EXIT
url=$(bench_db inbound_probe_pipelining)
cargo run --release --quiet --manifest-path scripts/probe-pipelining/Cargo.toml -- \
  "$url" "${PROBE_SECONDS:-10}" "${PROBE_ROUNDS:-4}"
