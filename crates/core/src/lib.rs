//! `inbound-core`: everything both binaries share and nothing that speaks HTTP.
//!
//! - [`config`]: the TOML configuration, validated, with secrets resolved from references.
//! - [`secret`]: secret references (`env:` / `file:`) and the redacted [`secret::Secret`].
//! - [`sender`]: a delivery's headers signed as an integration's sender signs them.
//! - [`verify`]: the provider signature verifiers (and matching signers), pure functions.
//! - [`event`]: shape validation, event id/type extraction, source scope and routing.
//! - [`effects`]: the effect delivery rules (pure), the sink request and its signature.
//! - [`keys`]: the receipt key's newtypes.
//! - [`payload`]: the storability contract (what `jsonb` stores and the worker reads back).
//! - [`clock`]: an injectable clock so freshness checks are testable.
//! - [`store`]: all SQL, and the embedded migrations.
//! - [`handlers`]: the handler model (trait, transitions, effect intents) and the built-ins.
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
//!   [`event::ExtractError`] (400 with its detail, or 403), [`secret::SecretError`],
//!   [`handlers::HandlerError`] (the receipt is retried), and the store's decisions
//!   ([`store::admin::ReplayError`], [`store::admin::ResolveError`],
//!   [`store::effects::ResolveError`], [`store::MigrationError`]), whose messages are
//!   written for the operator who asked;
//! - a statement's failure is `sqlx::Error`, passed through unchanged: only the caller
//!   knows what it means (the ingress answers 503, the worker retries), and
//!   [`store::is_unavailability`] tells a database that is away from one that refused
//!   the data;
//! - no message carries a secret, a database URL's password or a payload field.

pub mod clock;
pub mod config;
pub mod effects;
pub mod event;
pub mod handlers;
pub mod headers;
pub mod keys;
pub mod known_events;
pub mod payload;
pub mod secret;
pub mod sender;
pub mod states;
pub mod store;
pub mod verify;
