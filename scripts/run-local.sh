#!/usr/bin/env bash
# `make run`: everything up locally. Checks that its ports are free, makes sure PostgreSQL
# answers, creates and migrates the database, creates .env.local with fresh example secrets
# on first run, seeds the example order, starts the ingress, the worker, a dev-sink
# receiving the effects and the operator's console (deciding as $USER), and — once they answer — prints commands that work as pasted in
# another terminal, then runs until Ctrl-C (all drain). A process that dies ends the run
# with a non-zero status.
#
# Ports (each HOST:PORT): INBOUND_LISTEN (the ingress, 127.0.0.1:8080),
# INBOUND_METRICS_LISTEN (its ops port, 127.0.0.1:9090), INBOUND_WORKER_METRICS_LISTEN
# (127.0.0.1:9091), INBOUND_DEV_SINK_LISTEN (the dev-sink, 127.0.0.1:8181),
# INBOUND_CONSOLE_LISTEN (the console, 127.0.0.1:8090).
set -euo pipefail
cd "$(dirname "$0")/.."

listen="${INBOUND_LISTEN:-127.0.0.1:8080}"
ingress_metrics="${INBOUND_METRICS_LISTEN:-127.0.0.1:9090}"
worker_metrics="${INBOUND_WORKER_METRICS_LISTEN:-127.0.0.1:9091}"
sink_listen="${INBOUND_DEV_SINK_LISTEN:-127.0.0.1:8181}"
console_listen="${INBOUND_CONSOLE_LISTEN:-127.0.0.1:8090}"
unset INBOUND_LISTEN INBOUND_METRICS_LISTEN INBOUND_CONSOLE_LISTEN

# Before anything is built or started: a taken port would make a process die after the
# banner, and a pasted command would reach whatever holds the port.
port_free() { # HOST:PORT
  python3 - "$1" <<'PY'
import socket, sys
host, _, port = sys.argv[1].rpartition(":")
with socket.socket() as probe:
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((host.strip("[]") or "127.0.0.1", int(port)))
    except OSError:
        sys.exit(1)
PY
}
for pair in "INBOUND_LISTEN=$listen" "INBOUND_METRICS_LISTEN=$ingress_metrics" \
  "INBOUND_WORKER_METRICS_LISTEN=$worker_metrics" "INBOUND_DEV_SINK_LISTEN=$sink_listen" \
  "INBOUND_CONSOLE_LISTEN=$console_listen"; do
  if ! port_free "${pair#*=}"; then
    echo "make run: ${pair#*=} is taken (another make run, or another program): set ${pair%%=*}=127.0.0.1:PORT to use another" >&2
    exit 1
  fi
done

# DATABASE_URL as given, else database `inbound` on the local server (ensure-postgres.sh).
admin_url=$(scripts/ensure-postgres.sh)
export DATABASE_URL="${DATABASE_URL:-${admin_url%/*}/inbound}"
export INBOUND_CONFIG="${INBOUND_CONFIG:-config/example.toml}"

. scripts/env-local.sh

# The example's sinks point at the dev-sink's default address; elsewhere, a copy says so.
if [ "$sink_listen" != "127.0.0.1:8181" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  sed "s#127\.0\.0\.1:8181#$sink_listen#g" "$INBOUND_CONFIG" > "$work/config.toml"
  export INBOUND_CONFIG="$work/config.toml"
fi

echo "make run: building the debug binaries (after make test, which builds them with test features, this rebuilds them)"
cargo build -p inbound-ingress -p inbound-stock-worker -p inboundctl
bin="${CARGO_TARGET_DIR:-target}/debug"

"$bin/inboundctl" migrate --create-database
# The stock worker carries the reference domain's tables (schema inbound_example).
"$bin/inbound-worker" migrate
"$bin/inboundctl" check-config
# The example event pays this order (a business creates its orders with the PaymentIntent id).
psql -q "$DATABASE_URL" -c "INSERT INTO inbound_example.orders (tenant_id, id, provider_payment_id, total_minor, currency)
  VALUES ('example', 'order_1', 'pi_local', 2000, 'usd') ON CONFLICT DO NOTHING"

"$bin/inbound-ingress" --listen "$listen" --metrics-listen "$ingress_metrics" --log-format text &
ingress=$!
"$bin/inbound-worker" --metrics-listen "$worker_metrics" --log-format text &
worker=$!
# The example sinks' receiver: prints each effect and verifies its signature.
"$bin/inboundctl" dev-sink --listen "$sink_listen" --secret env:EXAMPLE_SINK_SECRET &
sink=$!
# The operator's console, deciding as you (docs/console.md).
"$bin/inboundctl" console --listen "$console_listen" --by "${USER:-local-operator}" \
  --log-format text >/dev/null &
console=$!
stop() { kill -TERM "$ingress" "$worker" "$sink" "$console" 2>/dev/null || true; }
stopping=""
trap 'stopping=1; stop' INT TERM

# The banner only once all four answer; a process that died at start-up ends the run.
for _ in $(seq 1 100); do
  for pid in "$ingress" "$worker" "$sink" "$console"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "make run: a process exited at start-up (its error is above); stopping the others" >&2
      stop
      wait 2>/dev/null || true
      exit 1
    fi
  done
  if curl -sf "http://$ingress_metrics/readyz" >/dev/null 2>&1 &&
    curl -sf "http://$worker_metrics/healthz" >/dev/null 2>&1 &&
    curl -sf "http://$console_listen/" >/dev/null 2>&1; then
    break
  fi
  sleep 0.2
done

event_id="evt_local_$(date +%s)"
body="{\"id\":\"$event_id\",\"object\":\"event\",\"type\":\"payment_intent.succeeded\",\"livemode\":false,\"data\":{\"object\":{\"id\":\"pi_local\",\"object\":\"payment_intent\",\"status\":\"succeeded\",\"amount_received\":2000,\"currency\":\"usd\",\"metadata\":{\"order_id\":\"order_1\"}}}}"
# The banner never shows a password: a generated local one lives in .env.local, which the
# other terminal reads (LOCAL_DATABASE_URL), so the printed export works as pasted.
shown_url=$(sed -E 's#(://[^:/@]+):[^@]*@#\1:***@#' <<<"$DATABASE_URL")
if [ "$shown_url" = "$DATABASE_URL" ]; then
  database_export="export DATABASE_URL='$DATABASE_URL'"
elif [ -n "${LOCAL_DATABASE_URL:-}" ] && [ "$DATABASE_URL" = "${LOCAL_DATABASE_URL%/*}/inbound" ]; then
  # Expanded in the other terminal, from .env.local: the password is never printed.
  # shellcheck disable=SC2016
  database_export='export DATABASE_URL="${LOCAL_DATABASE_URL%/*}/inbound"'
else
  database_export="export DATABASE_URL='$shown_url'   # put your password where *** is"
fi
cat <<MSG

inbound-ingress on http://$listen (metrics http://$ingress_metrics/metrics),
inbound-worker (metrics http://$worker_metrics/metrics), dev-sink on $sink_listen,
the operator's console on http://$console_listen (deciding as ${USER:-local-operator}).
Ctrl-C stops all four.

Send a signed test event from another terminal (valid for 5 minutes):

  $("$bin/inboundctl" sign-event --integration stripe-example --body "$body" --url "http://$listen")

Send it twice: the first answer is "accepted", the second "duplicate". Then, in that
terminal, from $(pwd):

  set -a; . ./.env.local; set +a
  $database_export
  export INBOUND_CONFIG='$INBOUND_CONFIG'
  $bin/inboundctl status
  psql "\$DATABASE_URL" -c "SELECT id, status FROM inbound_example.orders"
  $bin/inboundctl sign-event --integration stripe-example --body '{"id":"evt_again","object":"event","type":"customer.created","livemode":false,"data":{"object":{}}}' --url http://$listen | sh

MSG
# Whichever ends first (Ctrl-C, or a crash), stop the others and wait for them to drain.
status=0
wait -n "$ingress" "$worker" "$sink" "$console" || status=$?
if [ -z "$stopping" ]; then
  echo "make run: a process exited (status $status); stopping the others" >&2
fi
stop
wait "$ingress" "$worker" "$sink" "$console" 2>/dev/null || true
[ -n "$stopping" ] || exit 1
