# inbound — the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
# Crash-table fixtures need the failpoints feature; release builds never enable it.
TEST_FEATURES := --features inbound-service/failpoints

.PHONY: run demo test lint fmt build release bench-ingress bench-worker deploy-check check-metrics postgres

## Everything up locally: PostgreSQL, database, example config and secrets, ingress and worker.
run:
	scripts/run-local.sh

## One order paid once, however often the provider repeats itself.
demo:
	scripts/demo.sh

## The whole suite against real PostgreSQL (started here when it is not running).
test: postgres
	$(CARGO) build --workspace --bins $(TEST_FEATURES)
	@if command -v cargo-nextest >/dev/null 2>&1; then \
		$(CARGO) nextest run --workspace $(TEST_FEATURES) --no-fail-fast; \
	else \
		$(CARGO) test --workspace $(TEST_FEATURES) --no-fail-fast; \
	fi

## Formatting and clippy with warnings as errors.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets $(TEST_FEATURES) -- -D warnings

fmt:
	$(CARGO) fmt --all

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release -p inbound-ingress -p inbound-worker -p inboundctl

## Ingress throughput beside pgbench's single-row ceiling (a benchmark, not a test).
bench-ingress:
	scripts/bench-ingress.sh

## Worker throughput with 20,000 pending receipts, and recovery after SIGKILL (a benchmark).
bench-worker:
	scripts/bench-worker.sh

## Kubernetes manifests rendered and validated offline, alert rules checked and unit-tested.
deploy-check:
	scripts/deploy-check.sh

## A running ingress and worker, scraped and linted with promtool.
check-metrics: postgres
	scripts/check-metrics.sh

postgres:
	@scripts/ensure-postgres.sh
