#!/usr/bin/env bash
# Sourced by run-local.sh and scratch-stack.sh (and through it by demo.sh and
# check-metrics.sh): creates .env.local with fresh example secrets on first use (and adds
# any a newer example config needs), then exports them for config/example.toml.

random_hex() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
if [ ! -f .env.local ]; then
  echo "# Example secrets for config/example.toml, made by 'make run'. Not for production." > .env.local
  chmod 600 .env.local
  echo "created .env.local with fresh example secrets"
fi
add_missing() { # name value
  grep -q "^$1=" .env.local || echo "$1=$2" >> .env.local
}
add_missing EXAMPLE_STRIPE_SECRET "whsec_$(random_hex)"
add_missing EXAMPLE_GITHUB_SECRET "$(random_hex)"
add_missing EXAMPLE_SLACK_SECRET "$(random_hex)"
add_missing EXAMPLE_STANDARD_SECRET "whsec_$(head -c 24 /dev/urandom | base64)"
add_missing EXAMPLE_SHOPIFY_SECRET "shpss_$(random_hex)"
add_missing EXAMPLE_PADDLE_SECRET "pdl_ntfset_$(random_hex)"
add_missing EXAMPLE_ZOOM_SECRET "$(random_hex)"
add_missing EXAMPLE_LINEAR_SECRET "lin_wh_$(random_hex)"
add_missing EXAMPLE_GITLAB_TOKEN "$(random_hex)"
add_missing EXAMPLE_SINK_SECRET "whsec_$(head -c 24 /dev/urandom | base64)"
set -a
# shellcheck disable=SC1091
. ./.env.local
set +a
