#!/usr/bin/env bash
# `make run`: everything up locally. Makes sure PostgreSQL answers, creates and migrates
# the database, creates .env.local with fresh example secrets on first run, seeds the
# example order, prints a ready-to-paste command that sends a signed test event, then runs
# the ingress, the worker and a dev-sink receiving the effects until Ctrl-C (all drain).
set -euo pipefail
cd "$(dirname "$0")/.."

# DATABASE_URL as given, else database `inbound` on the local server (ensure-postgres.sh).
admin_url=$(scripts/ensure-postgres.sh)
export DATABASE_URL="${DATABASE_URL:-${admin_url%/*}/inbound}"
export INBOUND_CONFIG="${INBOUND_CONFIG:-config/example.toml}"
listen="${INBOUND_LISTEN:-127.0.0.1:8080}"
ingress_metrics="${INBOUND_METRICS_LISTEN:-127.0.0.1:9090}"
worker_metrics="${INBOUND_WORKER_METRICS_LISTEN:-127.0.0.1:9091}"
unset INBOUND_LISTEN INBOUND_METRICS_LISTEN

. scripts/env-local.sh

cargo build -p inbound-ingress -p inbound-worker -p inboundctl
bin="${CARGO_TARGET_DIR:-target}/debug"

"$bin/inboundctl" migrate --create-database --example
"$bin/inboundctl" check-config
# The example event pays this order (a business creates its orders with the PaymentIntent id).
psql -q "$DATABASE_URL" -c "INSERT INTO inbound_example.orders (tenant_id, id, provider_payment_id, total_minor, currency)
  VALUES ('example', 'order_1', 'pi_local', 2000, 'usd') ON CONFLICT DO NOTHING"

event_id="evt_local_$(date +%s)"
body="{\"id\":\"$event_id\",\"object\":\"event\",\"type\":\"payment_intent.succeeded\",\"livemode\":false,\"data\":{\"object\":{\"id\":\"pi_local\",\"object\":\"payment_intent\",\"status\":\"succeeded\",\"amount_received\":2000,\"currency\":\"usd\",\"metadata\":{\"order_id\":\"order_1\"}}}}"
# The banner never shows a password (a generated local one lives in .env.local).
shown_url=$(sed -E 's#(://[^:/@]+):[^@]*@#\1:***@#' <<<"$DATABASE_URL")
password_note=""
[ "$shown_url" != "$DATABASE_URL" ] && password_note="; its password is in .env.local when set up here"
cat <<MSG

inbound-ingress on http://$listen (metrics http://$ingress_metrics/metrics),
inbound-worker (metrics http://$worker_metrics/metrics), dev-sink on 127.0.0.1:8181.
Ctrl-C stops all three.
Send a signed test event from another terminal (valid for 5 minutes):

  $("$bin/inboundctl" sign-event --integration stripe-example --body "$body" --url "http://$listen")

Send it twice: the first answer is "accepted", the second "duplicate". Then:
  $bin/inboundctl status
  psql "\$DATABASE_URL" -c "SELECT id, status FROM inbound_example.orders"
  (DATABASE_URL=$shown_url$password_note)

MSG
"$bin/inbound-ingress" --listen "$listen" --metrics-listen "$ingress_metrics" --log-format text &
ingress=$!
"$bin/inbound-worker" --metrics-listen "$worker_metrics" --log-format text &
worker=$!
# The example sinks' receiver: prints each effect and verifies its signature.
"$bin/inboundctl" dev-sink --listen 127.0.0.1:8181 --secret env:EXAMPLE_SINK_SECRET &
sink=$!
stop() { kill -TERM "$ingress" "$worker" "$sink" 2>/dev/null || true; }
trap stop INT TERM
# Whichever ends first (Ctrl-C, or a crash), stop the others and wait for them to drain.
wait -n "$ingress" "$worker" "$sink" || true
stop
wait "$ingress" "$worker" "$sink" 2>/dev/null || true
