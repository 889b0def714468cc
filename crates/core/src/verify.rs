//! Signature verification over the raw body bytes: the machinery the providers share
//! (`mac`, `listed`, `v0`, the configurable schemes of [`custom`]), the caps on what an
//! unauthenticated request can cost, and [`Provider`], the senders the configuration
//! names. Each provider's own `verify` and `sign`, pure functions over plain data, are in
//! its home, and `crate::provider::verify` dispatches to them.
//! Every comparison of a computed MAC with a received one is constant-time (`mac`), and
//! an integration's several secrets (rotation) are all tried: any one that matches
//! verifies. Errors say which check failed so operators can read the log; the ingress
//! answers all of them with the same opaque 401.
//!
//! # What an unauthenticated request can cost
//!
//! Every request is refused before any cryptography when its header lists more than
//! [`MAX_SIGNATURES_PER_HEADER`] signatures, more than [`MAX_ED25519_SIGNATURES`] distinct
//! Ed25519 ones, or asks for more than [`MAX_ED25519_CHECKS`] Ed25519 checks; an
//! integration holds at most [`MAX_KEYS`] secrets and [`MAX_KEYS`] public keys. So one request costs at most one MAC pass over its signed bytes per secret
//! (however many signatures it lists: each MAC is compared with every candidate) plus
//! [`MAX_ED25519_CHECKS`] SHA-512 passes, and the body is never copied to be verified.
//! [`worst_case_cost`] states that bound for the ingress, which verifies a request whose
//! bound is larger than [`INLINE_COST_LIMIT`] off its async threads.

pub mod custom;
pub(crate) mod listed;
pub(crate) mod mac;
mod standard_keys;
pub(crate) mod v0;

use crate::secret::Secret;

pub use standard_keys::{
    decode_public_key as decode_standard_public_key, decode_secret as decode_standard_secret,
};

/// The most signatures one header may list, for every scheme that accepts several (Stripe
/// `v1`, Paddle `h1`, Standard Webhooks `v1` and `v1a`, a configured `separator`).
/// Senders list one per active secret — two while a secret rotates (Stripe's and Svix's
/// documentation, the Standard Webhooks specification's "webhook-signature") — so eight
/// leaves room. Counted before anything is decoded or checked.
pub const MAX_SIGNATURES_PER_HEADER: usize = 8;

/// The most distinct `v1a` (Ed25519) signatures one request may list: a sender signs with
/// its current key, and with the old one too while it rotates.
pub const MAX_ED25519_SIGNATURES: usize = 2;

/// The most Ed25519 checks (distinct `v1a` signatures × `whpk_` keys) one request may ask
/// for: each is a SHA-512 pass over the whole message, which no check can share. Two
/// signatures under the old and the new key of a rotation are four.
pub const MAX_ED25519_CHECKS: usize = 4;

/// The most secrets, and the most public keys, one integration holds at once (a rotation
/// needs two).
pub const MAX_KEYS: usize = 4;

/// Verification whose [`worst_case_cost`] is at most this runs where the request is
/// handled; above it the ingress runs it on a bounded pool of its own: 1.5 MiB of SHA-256,
/// about a millisecond on the machines BENCHMARKS.md describes. One secret's MAC over the
/// largest default body (1 MiB) stays inline; two secrets, SHA-512 or Ed25519 over it do
/// not.
pub const INLINE_COST_LIMIT: u64 = 3 * 512 * 1024;

/// The webhook senders inbound understands: what the configuration names (`provider =
/// "stripe"`) and the facts it reads while validating (the answer timeout). Everything
/// else a provider is — its signature, what its deliveries mean, what its sender sends,
/// how long it redelivers, the event types it sends — lives in its home,
/// `crate::provider::<name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// `Stripe-Signature: t=…,v1=…`.
    Stripe,
    /// `X-Hub-Signature-256: sha256=…`.
    Github,
    /// `X-Slack-Signature: v0=…` with `X-Slack-Request-Timestamp`.
    Slack,
    /// Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`).
    Standard,
    /// `X-Shopify-Hmac-Sha256: <base64>` of the body.
    Shopify,
    /// Paddle Billing: `Paddle-Signature: ts=…;h1=…`.
    Paddle,
    /// `x-zm-signature: v0=…` with `x-zm-request-timestamp`.
    Zoom,
    /// A configurable HMAC scheme ([`custom::HmacScheme`]).
    Hmac,
    /// A static shared token in a header ([`custom::TokenScheme`]): authenticates, signs
    /// nothing.
    Token,
}

impl Provider {
    /// Every provider, in documentation order.
    pub const ALL: [Provider; 9] = [
        Self::Stripe,
        Self::Github,
        Self::Slack,
        Self::Standard,
        Self::Shopify,
        Self::Paddle,
        Self::Zoom,
        Self::Hmac,
        Self::Token,
    ];

    /// The name used in configuration.
    pub fn name(self) -> &'static str {
        match self {
            Self::Stripe => "stripe",
            Self::Github => "github",
            Self::Slack => "slack",
            Self::Standard => "standard",
            Self::Shopify => "shopify",
            Self::Paddle => "paddle",
            Self::Zoom => "zoom",
            Self::Hmac => "hmac",
            Self::Token => "token",
        }
    }

    /// How long the provider waits for an answer before it counts the delivery as failed,
    /// as far as it says (the ingress's p99 alert fires at half of it; an integration's
    /// `provider_timeout_secs` overrides it). GitHub documents 10 s, Slack 3 s, Svix (the
    /// Standard Webhooks reference sender) 15 s, Shopify and Paddle 5 s, Zoom 3 s; Stripe
    /// documents none, and
    /// reports of its limit range from 10 to 30 s, so the lowest is taken.
    pub(crate) fn delivery_timeout_secs(self) -> u64 {
        match self {
            // The configurable schemes: 10 s, unless `provider_timeout_secs` says.
            Self::Stripe | Self::Github | Self::Hmac | Self::Token => 10,
            Self::Slack | Self::Zoom => 3,
            Self::Standard => 15,
            Self::Shopify | Self::Paddle => 5,
        }
    }

    /// Parses a configuration name.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|provider| provider.name() == name)
    }
}

/// Why a request is not authentic. All of these are answered 401.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// A header the scheme requires is absent (or not valid UTF-8).
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    /// A header is present but cannot be parsed.
    #[error("malformed header {0}")]
    MalformedHeader(&'static str),
    /// The signed timestamp is older than the tolerance.
    #[error("timestamp older than the tolerance")]
    TimestampTooOld,
    /// The signed timestamp is further in the future than the tolerance.
    #[error("timestamp further in the future than the tolerance")]
    TimestampInFuture,
    /// No received signature matches any configured secret.
    #[error("no signature matches")]
    NoMatchingSignature,
    /// The header lists more signatures than [`MAX_SIGNATURES_PER_HEADER`] (or more
    /// Ed25519 ones than [`MAX_ED25519_SIGNATURES`]), or asks for more than
    /// [`MAX_ED25519_CHECKS`] Ed25519 checks; refused before any is checked.
    #[error("more signatures than any sender lists")]
    TooManySignatures,
}

/// An Ed25519 public key (Standard Webhooks `whpk_`): it verifies, it cannot sign, so it
/// is no secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublicKey(pub [u8; 32]);

/// What the verifier needs besides the request: the keys and the time.
#[derive(Debug, Clone, Copy)]
pub struct VerifyContext<'a> {
    /// Every active secret of the integration (rotation: any one may match).
    pub secrets: &'a [Secret],
    /// Standard Webhooks' public keys (`v1a` signatures); empty for every other scheme.
    pub public_keys: &'a [PublicKey],
    /// Allowed distance, either way, between the signed timestamp and now.
    pub tolerance_secs: u64,
    /// The current Unix time, from an injectable clock.
    pub now_unix_secs: i64,
}

/// An upper bound on the work of verifying one request whose signed bytes (body and
/// header parts) are `signed_len` long, whatever its headers say, in bytes of SHA-256
/// work: a SHA-512 byte counts three (it runs at a third of SHA-256's speed where SHA-256
/// has CPU support), an Ed25519 check's point arithmetic 64 KiB. Given the caps of this
/// module it is what a forged request can make the ingress spend.
pub fn worst_case_cost(
    provider: Provider,
    scheme: Option<&custom::CustomVerifier>,
    secrets: usize,
    public_keys: usize,
    signed_len: usize,
) -> u64 {
    const SHA512_FACTOR: u64 = 3;
    const ED25519_POINT_WORK: u64 = 64 * 1024;
    let length = u64::try_from(signed_len).unwrap_or(u64::MAX);
    let secrets = u64::try_from(secrets).unwrap_or(u64::MAX);
    let mac_factor = match (provider, scheme) {
        (_, Some(custom::CustomVerifier::Token(_))) | (Provider::Token | Provider::Hmac, None) => 0,
        (_, Some(custom::CustomVerifier::Hmac(hmac)))
            if hmac.algorithm == custom::Algorithm::Sha512 =>
        {
            SHA512_FACTOR
        }
        _ => 1,
    };
    let macs = secrets.saturating_mul(length).saturating_mul(mac_factor);
    let ed25519 = if provider == Provider::Standard && public_keys > 0 {
        let checks = MAX_ED25519_CHECKS.min(MAX_ED25519_SIGNATURES * public_keys) as u64;
        checks.saturating_mul(
            length
                .saturating_mul(SHA512_FACTOR)
                .saturating_add(ED25519_POINT_WORK),
        )
    } else {
        0
    };
    macs.saturating_add(ed25519)
}

/// Refuses a header listing more than [`MAX_SIGNATURES_PER_HEADER`] signatures.
pub(crate) fn check_signature_count(count: usize) -> Result<(), VerifyError> {
    if count > MAX_SIGNATURES_PER_HEADER {
        Err(VerifyError::TooManySignatures)
    } else {
        Ok(())
    }
}

/// Parses a decimal Unix timestamp and checks it is within tolerance of now, both ways.
pub(crate) fn check_freshness(
    header: &'static str,
    timestamp: &str,
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    if timestamp.is_empty() || !timestamp.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(VerifyError::MalformedHeader(header));
    }
    let signed_at: i64 = timestamp
        .parse()
        .map_err(|_| VerifyError::MalformedHeader(header))?;
    let tolerance = i64::try_from(context.tolerance_secs).unwrap_or(i64::MAX);
    let age = context.now_unix_secs.saturating_sub(signed_at);
    if age > tolerance {
        Err(VerifyError::TimestampTooOld)
    } else if age < tolerance.saturating_neg() {
        Err(VerifyError::TimestampInFuture)
    } else {
        Ok(())
    }
}
