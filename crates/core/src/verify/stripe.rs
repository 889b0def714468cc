//! Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…][,v0=…]`, HMAC-SHA256 of
//! `"{t}.{body}"` keyed by the whole `whsec_…` string. Any `v1` may match; `v0` (the old
//! test-mode scheme) is ignored.

use super::listed::Listed;
use super::{VerifyContext, VerifyError};
use crate::headers::Headers;
use crate::secret::Secret;

const HEADER: &str = "stripe-signature";

const STRIPE: Listed = Listed {
    header: HEADER,
    separator: ',',
    timestamp: "t",
    signature: "v1",
    joiner: b".",
};

/// Verifies a Stripe delivery.
pub(super) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    STRIPE.verify(headers, body, context)
}

/// The `Stripe-Signature` value Stripe would send for `body` at `timestamp`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    STRIPE.sign(secret, timestamp, body)
}
