//! `inbound-core`: everything both binaries share and nothing that speaks HTTP.
//!
//! - [`config`]: the TOML configuration, validated, with secrets resolved from references.
//! - [`secret`]: secret references (`env:` / `file:`) and the redacted [`secret::Secret`].
//! - [`verify`]: the provider signature verifiers (and matching signers), pure functions.
//! - [`event`]: shape validation, event id/type extraction, source scope and routing.
//! - [`effects`]: the effect delivery rules (pure), the sink request and its signature.
//! - [`keys`]: the receipt key's newtypes.
//! - [`payload`]: the storability contract (what `jsonb` stores and the worker reads back).
//! - [`clock`]: an injectable clock so freshness checks are testable.
//! - [`store`]: all SQL, and the embedded migrations.
//! - [`handlers`]: the handler model (trait, transitions, effect intents) and the built-ins.

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
pub mod states;
pub mod store;
pub mod verify;
