//! HMAC-SHA256 and the constant-time "does any candidate match any key" check.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::secret::Secret;

/// HMAC-SHA256 output length in bytes.
pub(crate) const MAC_LEN: usize = 32;

/// HMAC-SHA256 of the concatenation of `parts` under `key`.
pub(crate) fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
    // HMAC accepts keys of any length (long keys are hashed), so this cannot fail.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// Whether any received `candidates` equals the MAC of `parts` under any of `secrets`.
///
/// Every pair is compared, in constant time, with no early exit on a match, so timing
/// reveals neither which secret matched nor how much of a signature was right.
pub(crate) fn any_matches(secrets: &[Secret], parts: &[&[u8]], candidates: &[Vec<u8>]) -> bool {
    let mut matched = subtle::Choice::from(0);
    for secret in secrets {
        let expected = hmac_sha256(secret.expose(), parts);
        for candidate in candidates {
            matched |= expected.as_slice().ct_eq(candidate.as_slice());
        }
    }
    matched.into()
}
