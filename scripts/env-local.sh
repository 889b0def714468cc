#!/usr/bin/env bash
# Sourced by run-local.sh and demo.sh: creates .env.local with fresh example secrets on
# first use, then exports them for config/example.toml.

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
