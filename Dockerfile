# syntax=docker/dockerfile:1
# Multi-stage build of the three binaries. The SQL is checked at compile time against the
# committed cache (.sqlx/), so the build needs no database; SQLX_OFFLINE makes sure.
FROM rust:1.95-bookworm AS build
WORKDIR /src
ENV SQLX_OFFLINE=true
COPY . .
RUN cargo build --release --locked -p inbound-ingress -p inbound-stock-worker -p inboundctl

# distroless: no shell, CA certificates for TLS to PostgreSQL and sinks, non-root user.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/inbound-ingress /src/target/release/inbound-worker /src/target/release/inboundctl /usr/local/bin/
USER 65532:65532
EXPOSE 8080 9090 9091
ENTRYPOINT ["/usr/local/bin/inbound-ingress"]
