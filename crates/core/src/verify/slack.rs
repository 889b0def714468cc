//! Slack: `X-Slack-Signature: v0=<hex>`, HMAC-SHA256 of `"v0:{ts}:{body}"` where `ts` is
//! `X-Slack-Request-Timestamp`, which must be within tolerance of now ([`super::v0`]).

use super::v0::V0;
use super::{VerifyContext, VerifyError};
use crate::headers::Headers;
use crate::secret::Secret;

const SLACK: V0 = V0 {
    signature: "x-slack-signature",
    timestamp: "x-slack-request-timestamp",
};

/// Verifies a Slack request.
pub(super) fn verify(
    headers: &Headers<'_>,
    body: &[u8],
    context: VerifyContext<'_>,
) -> Result<(), VerifyError> {
    SLACK.verify(headers, body, context)
}

/// The `X-Slack-Signature` value Slack would send for `body` at `timestamp`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    V0::sign(secret, timestamp, body)
}
