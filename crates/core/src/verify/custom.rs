//! The configurable schemes, for senders without a verifier of their own.
//!
//! - [`HmacScheme`]: an HMAC (SHA-1, SHA-256 or SHA-512) in one header, hex or base64,
//!   optionally behind a prefix and several per header, over the body alone or over a
//!   template of a timestamp header and the body (whose freshness is then checked).
//! - [`TokenScheme`]: a static secret sent in a header (GitLab's `X-Gitlab-Token`). It
//!   authenticates the sender but signs nothing: whoever sees one request can send any
//!   body with it, and nothing stops a replay but the receipt key. Prefer an HMAC scheme
//!   wherever the sender offers one.
//!
//! Every comparison is constant-time over every secret and every candidate.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, KeyInit, Mac};
use subtle::ConstantTimeEq;

use super::{VerifyContext, VerifyError, check_freshness, check_signature_count};
use crate::headers::Headers;
use crate::secret::Secret;

/// A configurable verifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CustomVerifier {
    /// An HMAC of the body (or of a template over a timestamp and the body).
    Hmac(HmacScheme),
    /// A static shared token in a header.
    Token(TokenScheme),
}

/// The MAC's hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// HMAC-SHA1 (Intercom, Vercel): weaker, but still an HMAC.
    Sha1,
    /// HMAC-SHA256.
    Sha256,
    /// HMAC-SHA512.
    Sha512,
}

/// How a signature is written in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Lower- or upper-case hex.
    Hex,
    /// Standard base64 with padding.
    Base64,
}

/// One piece of the signed content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text as written in the template.
    Literal(String),
    /// The timestamp header's value, as sent.
    Timestamp,
    /// The raw body.
    Body,
}

/// How the timestamp header counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampUnit {
    /// Unix seconds.
    Seconds,
    /// Unix milliseconds.
    Milliseconds,
}

/// An HMAC in a header. Validated by the configuration: a header name, a template that
/// signs the body, and a timestamp header exactly when the template signs one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HmacScheme {
    /// The signature header (lower case).
    pub header: String,
    /// What precedes each signature (`sha256=`, `v1=`; may be empty).
    pub prefix: String,
    /// Several signatures in the header, split by this (`None`: one).
    pub separator: Option<String>,
    /// The hash.
    pub algorithm: Algorithm,
    /// The encoding.
    pub encoding: Encoding,
    /// What is signed, in order.
    pub signed: Vec<Part>,
    /// The header holding the signed timestamp (lower case), when `signed` has one.
    pub timestamp_header: Option<String>,
    /// Its unit.
    pub timestamp_unit: TimestampUnit,
}

impl HmacScheme {
    /// What is signed, in order: the template's pieces with `timestamp` and `body` in place.
    fn signed_parts<'a>(&'a self, timestamp: &'a str, body: &'a [u8]) -> Vec<&'a [u8]> {
        self.signed
            .iter()
            .map(|part| match part {
                Part::Literal(text) => text.as_bytes(),
                Part::Timestamp => timestamp.as_bytes(),
                Part::Body => body,
            })
            .collect()
    }
}

/// A static shared token in a header (lower case).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenScheme {
    /// The header.
    pub header: String,
}

/// Verifies a request under a configurable scheme.
pub fn verify(
    scheme: &CustomVerifier,
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    match scheme {
        CustomVerifier::Hmac(scheme) => verify_hmac(scheme, headers, body, context),
        CustomVerifier::Token(scheme) => verify_token(scheme, headers, context),
    }
}

/// Error variants name headers statically; a configured one is named by its role.
const SIGNATURE_HEADER: &str = "the configured signature header";
const TIMESTAMP_HEADER: &str = "the configured timestamp header";

fn verify_hmac(
    scheme: &HmacScheme,
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    let value = headers
        .get(&scheme.header)
        .ok_or(VerifyError::MissingHeader(SIGNATURE_HEADER))?;
    if let Some(separator) = &scheme.separator {
        check_signature_count(value.split(separator.as_str()).count())?;
    }
    let timestamp = match &scheme.timestamp_header {
        None => None,
        Some(name) => {
            let timestamp = headers
                .get(name)
                .ok_or(VerifyError::MissingHeader(TIMESTAMP_HEADER))?;
            let seconds = match scheme.timestamp_unit {
                TimestampUnit::Seconds => timestamp.to_owned(),
                // Freshness is judged in whole seconds.
                TimestampUnit::Milliseconds => timestamp
                    .len()
                    .checked_sub(3)
                    .filter(|_| timestamp.bytes().all(|byte| byte.is_ascii_digit()))
                    .map(|cut| timestamp[..cut].to_owned())
                    .unwrap_or_default(),
            };
            check_freshness(TIMESTAMP_HEADER, &seconds, context)?;
            Some(timestamp)
        }
    };
    let entries: Vec<&str> = match &scheme.separator {
        Some(separator) => value.split(separator.as_str()).map(str::trim).collect(),
        None => vec![value],
    };
    let candidates: Vec<Vec<u8>> = entries
        .into_iter()
        .filter_map(|entry| entry.strip_prefix(scheme.prefix.as_str()))
        .filter_map(|encoded| match scheme.encoding {
            Encoding::Hex => hex::decode(encoded).ok(),
            Encoding::Base64 => BASE64.decode(encoded).ok(),
        })
        .collect();
    if candidates.is_empty() {
        return Err(VerifyError::MalformedHeader(SIGNATURE_HEADER));
    }
    let parts = scheme.signed_parts(timestamp.unwrap_or_default(), body);
    let mut matched = subtle::Choice::from(0);
    for secret in context.secrets {
        let expected = mac(scheme.algorithm, secret.expose(), &parts);
        for candidate in &candidates {
            matched |= expected.as_slice().ct_eq(candidate.as_slice());
        }
    }
    if bool::from(matched) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

fn verify_token(
    scheme: &TokenScheme,
    headers: &Headers<'_>,
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    let received = headers
        .get(&scheme.header)
        .ok_or(VerifyError::MissingHeader("the configured token header"))?;
    // Digests of equal length are compared, so timing reveals not even the token's length.
    let received = sha2_256(received.as_bytes());
    let mut matched = subtle::Choice::from(0);
    for secret in context.secrets {
        matched |= sha2_256(secret.expose()).ct_eq(&received);
    }
    if bool::from(matched) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

fn sha2_256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

/// The HMAC of the concatenated `parts` under `key`.
pub fn mac(algorithm: Algorithm, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    fn run<M: Mac + KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        // HMAC takes keys of any length, so this cannot fail.
        let mut mac = <M as KeyInit>::new_from_slice(key)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().to_vec()
    }
    match algorithm {
        Algorithm::Sha1 => run::<Hmac<sha1::Sha1>>(key, parts),
        Algorithm::Sha256 => run::<Hmac<sha2::Sha256>>(key, parts),
        Algorithm::Sha512 => run::<Hmac<sha2::Sha512>>(key, parts),
    }
}

/// The header value `scheme` expects for `body` (signed at `timestamp`, when the template
/// signs one), with one signature: what a sender of this scheme would send.
pub fn sign(scheme: &HmacScheme, secret: &Secret, timestamp: &str, body: &[u8]) -> String {
    let parts = scheme.signed_parts(timestamp, body);
    let signature = mac(scheme.algorithm, secret.expose(), &parts);
    let encoded = match scheme.encoding {
        Encoding::Hex => hex::encode(signature),
        Encoding::Base64 => BASE64.encode(signature),
    };
    format!("{}{encoded}", scheme.prefix)
}
