//! Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>…]`, HMAC-SHA256 of
//! `"{ts}:{body}"` keyed by the notification destination's secret key. While a secret
//! rotates Paddle sends one `h1` per active key: any may match.

use super::listed::Listed;
use super::{VerifyContext, VerifyError};
use crate::headers::Headers;
use crate::secret::Secret;

const PADDLE: Listed = Listed {
    header: "paddle-signature",
    separator: ';',
    timestamp: "ts",
    signature: "h1",
    joiner: b":",
};

/// Verifies a Paddle Billing delivery.
pub(super) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    PADDLE.verify(headers, body, context)
}

/// The `Paddle-Signature` value Paddle would send for `body` at `timestamp`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    PADDLE.sign(secret, timestamp, body)
}
