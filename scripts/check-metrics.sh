#!/usr/bin/env bash
# `make check-metrics`: runs an ingress and a worker against a scratch database, sends one
# signed event through them (so every series appears), scrapes both /metrics pages and
# lints them with `promtool check metrics`.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v promtool >/dev/null 2>&1 || { echo "promtool not found: apt-get install prometheus" >&2; exit 1; }

. scripts/scratch-stack.sh
scratch_stack inbound_check_metrics 127.0.0.1:18280 127.0.0.1:19290 127.0.0.1:19291 --gauge-interval-secs 1
psql -q "$DATABASE_URL" -c "INSERT INTO inbound_example.orders (tenant_id, id, provider_payment_id, total_minor, currency)
  VALUES ('example', 'order_m', 'pi_m', 2000, 'usd')"

body='{"id":"evt_metrics","object":"event","type":"payment_intent.succeeded","livemode":false,"data":{"object":{"id":"pi_m","object":"payment_intent","status":"succeeded","amount_received":2000,"currency":"usd","metadata":{"order_id":"order_m"}}}}'
eval "$("$bin/inboundctl" sign-event --integration stripe-example --body "$body" --url http://127.0.0.1:18280)" >/dev/null
for _ in $(seq 1 100); do
  [ "$(psql -Atq "$DATABASE_URL" -c "SELECT count(*) FROM inbound.effects WHERE status = 'completed'")" = 1 ] && break
  sleep 0.1
done
sleep 1.5 # one gauge refresh after the effect completed

status=0
for role in ingress:19290 worker:19291; do
  name=${role%%:*}
  curl -sf "http://127.0.0.1:${role##*:}/metrics" > "$work/$name.prom"
  echo "== $name: $(grep -c '^inbound_' "$work/$name.prom") inbound series"
  if ! promtool check metrics < "$work/$name.prom"; then status=1; fi
done
[ "$status" = 0 ] && echo "check-metrics: ok"
exit "$status"
