//! `inbound-core`: the rules every process shares, with no I/O — no database, no
//! network, no runtime. All SQL, the migrations and the handler model are
//! `inbound-store`'s; with the `sqlx` feature, the keys and states here also map to and
//! from their stored columns.
//!
//! - [`config`]: the TOML configuration, validated, with secrets resolved from references.
//! - [`secret`]: secret references (`env:` / `file:`) and the redacted [`secret::Secret`].
//! - [`sender`]: a delivery's headers signed as an integration's sender signs them.
//! - [`provider`]: one home per provider — its signature, what its deliveries mean, the
//!   headers its sender sends, its timeouts and horizons, the event types it sends.
//! - [`verify`]: signature verification, the machinery providers share, the cost caps.
//! - [`event`]: shape validation, event id/type extraction, source scope and routing.
//! - [`effects`]: the effect delivery rules (pure), the sink request and its signature.
//! - [`keys`]: the receipt key's newtypes.
//! - [`payload`]: the storability contract (what `jsonb` stores and the worker reads back).
//! - [`clock`]: an injectable clock so freshness checks are testable.
//! - [`display`]: what a sender or a person wrote, made safe to show; names as audited.
//! - [`selection`]: what operators name — times (RFC 3339 or an age), integrations and
//!   sinks by id or owner.
//! - [`states`]: every receipt and effect state, stored as text and checked against the
//!   database's constraints.
//!
//! # Errors
//!
//! Core's errors are matched on, so they are enums (`thiserror`), never `anyhow`:
//! - each module that can fail has its own, in its callers' terms, carrying the ids and
//!   states involved: [`config::ConfigError`] (one line naming the field: what operators
//!   see at start-up and from `check-config`), [`verify::VerifyError`] (why a request is
//!   not authentic: logged as the reason, while the client gets a bare 401),
//!   [`event::ExtractError`] (400 with its detail, or 403) and [`secret::SecretError`];
//! - no message carries a secret, a database URL's password or a payload field.

pub mod clock;
pub mod config;
pub mod display;
pub mod effects;
pub mod event;
pub mod headers;
pub mod keys;
pub mod payload;
pub mod provider;
pub mod secret;
pub mod selection;
pub mod sender;
pub mod states;
pub mod verify;
