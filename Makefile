# inbound — the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
# Crash-table fixtures need the failpoints feature; release builds never enable it.
TEST_FEATURES := --features inbound-runtime/failpoints
# The published libraries, whose documentation `make lint` builds with warnings as errors.
LIBRARIES := inbound-core inbound-store inbound-runtime inbound-ingress inbound-worker inbound-example

.PHONY: run demo test soak fuzz deny lint fmt sqlx-prepare build release bench bench-memory bench-forgery bench-console bench-subjects deploy-check check-metrics check-patch postgres pgbouncer

## Everything up locally: PostgreSQL, database, example config and secrets, ingress and worker.
run:
	scripts/run-local.sh

## One order paid once, however often the provider repeats itself.
demo:
	scripts/demo.sh

## The whole suite against real PostgreSQL (started here when it is not running), PgBouncer
## installed for the pooler tests.
test: postgres pgbouncer
	$(CARGO) build --workspace --bins $(TEST_FEATURES)
	@url="$$(scripts/ensure-postgres.sh)" && export DATABASE_URL="$$url" && \
	if command -v cargo-nextest >/dev/null 2>&1; then \
		$(CARGO) nextest run --workspace $(TEST_FEATURES) --no-fail-fast && \
		$(CARGO) test --doc $(addprefix -p ,$(LIBRARIES)) --features inbound-worker/testing; \
	else \
		$(CARGO) test --workspace $(TEST_FEATURES) --no-fail-fast; \
	fi

## The chaos soak on release builds: `make soak DURATION=120` (seconds, default 60);
## `SOAK_ARGS=--pooler` runs it through PgBouncer in transaction mode.
DURATION ?= 60
SOAK_ARGS ?=
soak: postgres pgbouncer
	$(CARGO) build --release -p inbound-ingress -p inbound-stock-worker -p inbound-programs --bins
	url="$$(scripts/ensure-postgres.sh)" && DATABASE_URL="$$url" INBOUND_BIN_DIR=$${CARGO_TARGET_DIR:-target}/release \
		$${CARGO_TARGET_DIR:-target}/release/inbound-soak --duration-secs $(DURATION) $(SOAK_ARGS)

## Each cargo-fuzz target for FUZZ_SECS seconds on stable (sanitizer off; fuzz/README.md).
FUZZ_SECS ?= 60
FUZZ_TARGETS := verify verify_signed extract
fuzz:
	@command -v cargo-fuzz >/dev/null 2>&1 || $(CARGO) install --locked cargo-fuzz
	cd fuzz && for target in $(FUZZ_TARGETS); do \
		mkdir -p corpus/$$target && \
		$(CARGO) fuzz run --sanitizer none $$target corpus/$$target -- \
			-max_total_time=$(FUZZ_SECS) -print_final_stats=1 || exit 1; \
	done

## Licenses, bans and sources of every dependency (advisories need the network).
deny:
	@command -v cargo-deny >/dev/null 2>&1 || $(CARGO) install --locked cargo-deny
	$(CARGO) deny check licenses bans sources

## Formatting, clippy with warnings as errors (which refuses unchecked SQL in crates/:
## crates/clippy.toml), shellcheck over every script, squawk over every migration
## (.squawk.toml), the offline query cache (.sqlx/) current against the migrations
## (sqlx-cli; needs PostgreSQL), and the libraries' documentation with warnings as errors
## (a link to a private item fails; rustdoc does not report one to a hidden item).
lint: postgres
	@command -v shellcheck >/dev/null 2>&1 || { echo "shellcheck not found: apt-get install shellcheck" >&2; exit 1; }
	shellcheck -x scripts/*.sh bench/*.sh .ci/run
	scripts/lint-migrations.sh
	scripts/sqlx-prepare.sh --check
	$(CARGO) fmt --all -- --check
	rustfmt --edition 2024 --check fuzz/fuzz_targets/*.rs
	$(CARGO) clippy --workspace --all-targets $(TEST_FEATURES) -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps $(addprefix -p ,$(LIBRARIES)) --features inbound-worker/testing

fmt:
	$(CARGO) fmt --all

## Rewrites the offline query cache (.sqlx/) after a statement or migration changed.
sqlx-prepare: postgres
	scripts/sqlx-prepare.sh

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release -p inbound-ingress -p inbound-stock-worker -p inboundctl

## Every throughput figure beside its ceiling, in one run; writes BENCHMARKS.md (not a test).
bench: postgres
	bench/run.sh

## Peak RSS of each role under hostile inputs (also part of `make bench`).
bench-memory: postgres
	bench/memory.sh

## Each console page's time on 5,000,000 receipts and 1,000,000 effects, with the plans.
bench-console: postgres
	bench/console.sh

## What subjects cost: the ingress naming one or not, the worker ordered or not (one run).
bench-subjects: postgres
	bench/subjects.sh

## Ingress CPU per forged request of each signature scheme (also part of `make bench`).
bench-forgery: postgres
	bench/forgery.sh

## Kubernetes manifests rendered and validated offline, alert rules checked and unit-tested.
deploy-check:
	scripts/deploy-check.sh

## A team's workspace without inbound's two [patch.crates-io] lines fails to build.
check-patch:
	scripts/check-unpatched-build-fails.sh

## A running ingress and worker, scraped and linted with promtool.
check-metrics: postgres
	scripts/check-metrics.sh

## The server the targets use: DATABASE_URL, else the local one (made to accept us: see
## scripts/ensure-postgres.sh, which prints its URL).
postgres:
	@scripts/ensure-postgres.sh >/dev/null

pgbouncer:
	@scripts/ensure-pgbouncer.sh
