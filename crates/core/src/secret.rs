//! Secrets: configuration names them by reference (`env:NAME` or `file:/path`), never by
//! value, and the resolved bytes live in [`Secret`], whose `Debug` prints nothing of them.

use std::fmt;

/// Key material. Its `Debug` is redacted and it has no `Display`, so it cannot reach a log
/// line or an error message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// Wraps raw key bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Self(bytes.into())
    }

    /// The key bytes, for the HMAC and nothing else.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A URL that may carry a credential (userinfo, a token in the path or the query, as
/// Slack incoming webhooks and many SaaS hooks do). Its `Debug` prints nothing of it and
/// it has no `Display`: it reaches the HTTP client and nothing else.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl(String);

impl SecretUrl {
    /// Wraps a URL.
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL, for the request and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretUrl(<redacted>)")
    }
}

/// Whether `value` names a secret (`env:NAME` or `file:/path`) rather than holding one.
pub fn is_reference(value: &str) -> bool {
    value.starts_with("env:") || value.starts_with("file:")
}

/// Why a secret reference could not be resolved. Messages name the reference, never a value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecretError {
    /// Neither `env:` nor `file:`: literals are refused so they never sit in a config file.
    #[error("must be a reference \"env:NAME\" or \"file:/path\", not a literal value")]
    NotAReference,
    /// `env:` with an empty name.
    #[error("\"env:\" needs a variable name")]
    EmptyEnvName,
    /// The variable is unset, empty or not UTF-8.
    #[error("environment variable {0} is not set or is empty")]
    EnvMissing(String),
    /// The file could not be read.
    #[error("cannot read secret file {path}: {reason}")]
    FileUnreadable {
        /// The path named in the reference.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The file holds only whitespace.
    #[error("secret file {0} is empty")]
    FileEmpty(String),
}

/// Resolves one reference. `env_lookup` stands in for `std::env::var` so tests need not
/// mutate the process environment. `file:` contents are trimmed of surrounding whitespace.
pub fn resolve_reference(
    reference: &str,
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, SecretError> {
    if let Some(name) = reference.strip_prefix("env:") {
        if name.is_empty() {
            return Err(SecretError::EmptyEnvName);
        }
        return match env_lookup(name) {
            Some(value) if !value.is_empty() => Ok(value),
            _ => Err(SecretError::EnvMissing(name.to_owned())),
        };
    }
    if let Some(path) = reference.strip_prefix("file:") {
        let contents =
            std::fs::read_to_string(path).map_err(|error| SecretError::FileUnreadable {
                path: path.to_owned(),
                reason: error.kind().to_string(),
            })?;
        let trimmed = contents.trim();
        if trimmed.is_empty() {
            return Err(SecretError::FileEmpty(path.to_owned()));
        }
        return Ok(trimmed.to_owned());
    }
    Err(SecretError::NotAReference)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with(name: &'static str, value: &'static str) -> impl Fn(&str) -> Option<String> {
        move |asked| (asked == name).then(|| value.to_owned())
    }

    #[test]
    fn env_reference_resolves_and_missing_or_empty_is_an_error() {
        assert_eq!(
            resolve_reference("env:A", &env_with("A", "s3cret")).as_deref(),
            Ok("s3cret")
        );
        assert_eq!(
            resolve_reference("env:B", &env_with("A", "x")),
            Err(SecretError::EnvMissing("B".into()))
        );
        assert_eq!(
            resolve_reference("env:A", &env_with("A", "")),
            Err(SecretError::EnvMissing("A".into()))
        );
        assert_eq!(
            resolve_reference("env:", &env_with("A", "x")),
            Err(SecretError::EmptyEnvName)
        );
    }

    #[test]
    fn file_reference_is_trimmed_and_empty_file_is_an_error() {
        let dir = std::env::temp_dir().join(format!("inbound-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let full = dir.join("full");
        let blank = dir.join("blank");
        std::fs::write(&full, "  whsec_abc \n").expect("write");
        std::fs::write(&blank, " \n\t").expect("write");
        let no_env = |_: &str| None;
        assert_eq!(
            resolve_reference(&format!("file:{}", full.display()), &no_env).as_deref(),
            Ok("whsec_abc")
        );
        assert!(matches!(
            resolve_reference(&format!("file:{}", blank.display()), &no_env),
            Err(SecretError::FileEmpty(_))
        ));
        assert!(matches!(
            resolve_reference("file:/nonexistent/inbound", &no_env),
            Err(SecretError::FileUnreadable { .. })
        ));
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn literal_is_refused_without_echoing_it() {
        let error = resolve_reference("sk_live_literal", &|_| None).expect_err("literal");
        assert!(!error.to_string().contains("sk_live_literal"));
    }

    #[test]
    fn debug_never_prints_key_bytes() {
        let secret = Secret::new(b"hunter2".to_vec());
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
    }
}
