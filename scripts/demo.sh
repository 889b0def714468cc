#!/usr/bin/env bash
# `make demo`: one order, paid once, however the provider repeats itself. Seeds an order,
# sends the signed payment_intent.succeeded three times plus once under a new event id,
# then a late payment_intent.payment_failed, printing each answer; then what the
# dev-sink received (the order-paid effect, exactly once), `inboundctl status` and the
# order row: one transition, no regression.
set -euo pipefail
cd "$(dirname "$0")/.."

listen=127.0.0.1:18080
. scripts/scratch-stack.sh
scratch_stack inbound_demo "$listen" 127.0.0.1:19090 127.0.0.1:19091
psql -q "$DATABASE_URL" -c "INSERT INTO inbound_example.orders (tenant_id, id, provider_payment_id, total_minor, currency)
  VALUES ('example', 'order_demo', 'pi_demo', 2000, 'usd')"

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
  [ "$(psql -Atq "$DATABASE_URL" -c "SELECT (SELECT count(*) FROM inbound.receipt_queue) + (SELECT count(*) FROM inbound.effects WHERE status <> 'completed')")" = 0 ] && break
  sleep 0.1
done
echo
echo "dev-sink received:"
sed 's/^/  /' "$work/sink.log"
echo
"$bin/inboundctl" status
echo
psql "$DATABASE_URL" -c "SELECT r.id AS receipt, r.event_id, r.status, r.outcome, r.outcome_reason FROM inbound.receipts r ORDER BY r.id"
psql "$DATABASE_URL" -c "SELECT id, status, provider_payment_id, paid_receipt_id, paid_at IS NOT NULL AS paid FROM inbound_example.orders"
