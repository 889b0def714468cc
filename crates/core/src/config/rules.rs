//! The small rules every part of the configuration checks by — the one-line error that
//! names a field, the id alphabet, an owner — so that integrations, sinks and custom
//! schemes share them without depending on each other.

use super::ConfigError;

/// The error for `field`, with what is wrong with it.
pub(super) fn invalid(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// Ids appear in URLs and metric labels: keep them to a safe, boring alphabet.
pub(super) fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
}

/// What [`is_valid_id`] accepts, as an error message says it.
pub(super) const ID_RULE: &str = "must be 1-64 characters of letters, digits, '-', '_' or '.'";

/// An owner is a metric label and an alert route: the id alphabet, or nothing.
pub(super) fn validate_owner(
    path: &str,
    owner: Option<String>,
) -> Result<Option<String>, ConfigError> {
    match owner {
        Some(owner) if !is_valid_id(&owner) => Err(invalid(format!("{path}.owner"), ID_RULE)),
        owner => Ok(owner),
    }
}
