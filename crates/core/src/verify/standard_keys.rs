//! Standard Webhooks' key formats: `whsec_<base64>` secrets and `whpk_<base64>` Ed25519
//! public keys, as the configuration reads them (for integrations and for sinks alike).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::PublicKey;
use crate::secret::Secret;

/// The y-coordinates (sign bit cleared) of Ed25519's small-order points, with the
/// non-canonical p and p + 1 — libsodium's list: a "public key" among them verifies
/// signatures anyone can make, whatever its sign bit (verifiers ignore it, and accept
/// y ≥ p).
const SMALL_ORDER: [&str; 7] = [
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0100000000000000000000000000000000000000000000000000000000000000",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
];

/// Decodes a `whpk_<base64>` public key (32 bytes), refusing the small-order points.
pub fn decode_public_key(key: &str) -> Result<PublicKey, base64::DecodeError> {
    let encoded = key.strip_prefix("whpk_").unwrap_or(key);
    let bytes = BASE64.decode(encoded)?;
    let key: [u8; 32] = bytes
        .try_into()
        .map_err(|bytes: Vec<u8>| base64::DecodeError::InvalidLength(bytes.len()))?;
    let mut y = key;
    y[31] &= 0x7f;
    if SMALL_ORDER.contains(&hex::encode(y).as_str()) {
        return Err(base64::DecodeError::InvalidLength(0));
    }
    Ok(PublicKey(key))
}

/// Decodes a `whsec_<base64>` secret (the prefix is optional) into key bytes.
pub fn decode_secret(secret: &str) -> Result<Secret, base64::DecodeError> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    let bytes = BASE64.decode(encoded)?;
    if bytes.is_empty() {
        return Err(base64::DecodeError::InvalidLength(0));
    }
    Ok(Secret::new(bytes))
}
