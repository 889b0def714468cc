#!/usr/bin/env bash
# `make run`: everything up locally. Makes sure PostgreSQL answers, creates and migrates
# the database, creates .env.local with fresh example secrets on first run, prints a
# ready-to-paste command that sends a signed test event, then runs the ingress in the
# foreground (Ctrl-C stops it and it drains).
set -euo pipefail
cd "$(dirname "$0")/.."

export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/inbound}"
export INBOUND_CONFIG="${INBOUND_CONFIG:-config/example.toml}"
listen="${INBOUND_LISTEN:-127.0.0.1:8080}"
metrics_listen="${INBOUND_METRICS_LISTEN:-127.0.0.1:9090}"

scripts/ensure-postgres.sh

if [ ! -f .env.local ]; then
  random_hex() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
  {
    echo "# Example secrets for config/example.toml, made by 'make run'. Not for production."
    echo "EXAMPLE_STRIPE_SECRET=whsec_$(random_hex)"
    echo "EXAMPLE_GITHUB_SECRET=$(random_hex)"
    echo "EXAMPLE_SLACK_SECRET=$(random_hex)"
    echo "EXAMPLE_STANDARD_SECRET=whsec_$(head -c 24 /dev/urandom | base64)"
  } > .env.local
  chmod 600 .env.local
  echo "created .env.local with fresh example secrets"
fi
set -a
# shellcheck disable=SC1091
. ./.env.local
set +a

cargo build --quiet -p inbound-ingress -p inboundctl
bin=target/debug

"$bin/inboundctl" migrate --create-database
"$bin/inboundctl" check-config

event_id="evt_local_$(date +%s)"
body="{\"id\":\"$event_id\",\"object\":\"event\",\"type\":\"payment_intent.succeeded\",\"livemode\":false,\"data\":{\"object\":{\"id\":\"pi_local\",\"amount_received\":2000,\"currency\":\"usd\",\"metadata\":{\"order_id\":\"order_1\"}}}}"
cat <<MSG

inbound-ingress is starting on http://$listen (metrics on http://$metrics_listen/metrics).
Send a signed test event from another terminal (valid for 5 minutes):

  $("$bin/inboundctl" sign-event --integration stripe-example --body "$body" --url "http://$listen")

Send it twice: the first answer is "accepted", the second "duplicate".

MSG
exec "$bin/inbound-ingress" --listen "$listen" --metrics-listen "$metrics_listen" --log-format text
