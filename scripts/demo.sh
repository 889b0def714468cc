#!/usr/bin/env bash
# `make demo`: one order, paid once, however the provider repeats itself. Seeds an order,
# sends the signed payment_intent.succeeded three times plus once under a new event id,
# then a late payment_intent.payment_failed, printing each answer; then what the
# dev-sink received (the order-paid effect, exactly once), `inboundctl status` and the
# order row: one transition, no regression.
set -euo pipefail
cd "$(dirname "$0")/.."

admin_url="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
export DATABASE_URL="${admin_url%/*}/inbound_demo"
export INBOUND_CONFIG=config/example.toml
unset INBOUND_LISTEN INBOUND_METRICS_LISTEN
listen=127.0.0.1:18080

scripts/ensure-postgres.sh
. scripts/env-local.sh
cargo build --quiet -p inbound-ingress -p inbound-worker -p inboundctl
bin=target/debug
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

psql -q "$admin_url" -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS inbound_demo WITH (FORCE)"
"$bin/inboundctl" migrate --create-database >/dev/null
psql -q "$DATABASE_URL" -c "INSERT INTO orders (tenant_id, id, provider_payment_id, total_minor, currency)
  VALUES ('example', 'order_demo', 'pi_demo', 2000, 'usd')"

RUST_LOG=warn "$bin/inbound-ingress" --listen "$listen" --metrics-listen 127.0.0.1:19090 2>"$work/ingress.log" &
pids+=($!)
RUST_LOG=warn "$bin/inbound-worker" --metrics-listen 127.0.0.1:19091 --poll-interval-ms 100 2>"$work/worker.log" &
pids+=($!)
"$bin/inboundctl" dev-sink --listen 127.0.0.1:8181 --secret env:EXAMPLE_SINK_SECRET >"$work/sink.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do curl -sf "http://$listen/readyz" >/dev/null && break; sleep 0.2; done

intent() { # event_id type status
  printf '{"id":"%s","object":"event","type":"%s","livemode":false,"data":{"object":{"id":"pi_demo","object":"payment_intent","status":"%s","amount_received":2000,"currency":"usd","metadata":{"order_id":"order_demo"}}}}' "$1" "$2" "$3"
}
send() { # label body
  printf '%-48s → ' "$1"
  eval "$("$bin/inboundctl" sign-event --integration stripe-example --body "$2" --url "http://$listen")"
  echo
}

succeeded=$(intent evt_demo_1 payment_intent.succeeded succeeded)
send "payment_intent.succeeded (evt_demo_1)" "$succeeded"
send "payment_intent.succeeded (evt_demo_1, again)" "$succeeded"
send "payment_intent.succeeded (evt_demo_1, third time)" "$succeeded"
send "payment_intent.succeeded (evt_demo_2, new id)" "$(intent evt_demo_2 payment_intent.succeeded succeeded)"
send "payment_intent.payment_failed (evt_demo_3, late)" "$(intent evt_demo_3 payment_intent.payment_failed requires_payment_method)"

for _ in $(seq 1 100); do
  [ "$(psql -Atq "$DATABASE_URL" -c "SELECT (SELECT count(*) FROM receipt_queue) + (SELECT count(*) FROM effects WHERE status <> 'completed')")" = 0 ] && break
  sleep 0.1
done
echo
echo "dev-sink received:"
sed 's/^/  /' "$work/sink.log"
echo
"$bin/inboundctl" status
echo
psql "$DATABASE_URL" -c "SELECT r.id AS receipt, r.event_id, r.status, r.outcome, r.outcome_reason FROM receipts r ORDER BY r.id"
psql "$DATABASE_URL" -c "SELECT id, status, provider_payment_id, paid_receipt_id, paid_at IS NOT NULL AS paid FROM orders"
