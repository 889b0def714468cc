#!/usr/bin/env bash
# Sourced by demo.sh and check-metrics.sh: a throwaway local installation.
#   scratch_stack DB_NAME LISTEN INGRESS_METRICS WORKER_METRICS [worker flags…]
# builds the binaries, recreates database DB_NAME (migrated), starts an ingress, a worker
# and a dev-sink for config/example.toml, waits until the ingress is ready, and stops them
# all when the calling script exits. The dev-sink listens on a free port (a copy of the
# configuration points the sinks at it), so this runs beside `make run`, which holds
# 8181. Sets: admin_url, DATABASE_URL, INBOUND_CONFIG, bin, work (logs: $work/ingress.log,
# worker.log, sink.log).

scratch_stack() {
  local name=$1 listen=$2 ingress_metrics=$3 worker_metrics=$4
  shift 4
  admin_url=$(scripts/ensure-postgres.sh)
  export DATABASE_URL="${admin_url%/*}/$name"
  unset INBOUND_LISTEN INBOUND_METRICS_LISTEN
  . scripts/env-local.sh
  cargo build -p inbound-ingress -p inbound-stock-worker -p inboundctl
  bin="${CARGO_TARGET_DIR:-target}/debug"
  work=$(mktemp -d)
  scratch_pids=()
  trap scratch_stack_down EXIT
  local sink_port
  sink_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  sed "s/127\.0\.0\.1:8181/127.0.0.1:$sink_port/g" config/example.toml > "$work/config.toml"
  export INBOUND_CONFIG="$work/config.toml"

  psql -q "$admin_url" -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $name WITH (FORCE)"
  "$bin/inboundctl" migrate --create-database >/dev/null
  "$bin/inbound-worker" migrate >/dev/null
  RUST_LOG="${RUST_LOG:-warn}" "$bin/inbound-ingress" --listen "$listen" --metrics-listen "$ingress_metrics" 2>"$work/ingress.log" &
  scratch_pids+=($!)
  RUST_LOG="${RUST_LOG:-warn}" "$bin/inbound-worker" --metrics-listen "$worker_metrics" --poll-interval-ms 100 "$@" 2>"$work/worker.log" &
  scratch_pids+=($!)
  "$bin/inboundctl" dev-sink --listen "127.0.0.1:$sink_port" --secret env:EXAMPLE_SINK_SECRET >"$work/sink.log" 2>&1 &
  scratch_pids+=($!)
  for _ in $(seq 1 50); do curl -sf "http://$listen/readyz" >/dev/null && return 0; sleep 0.2; done
  echo "the ingress did not become ready; its log:" >&2
  cat "$work/ingress.log" >&2
  return 1
}

scratch_stack_down() {
  for pid in "${scratch_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
