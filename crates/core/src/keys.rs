//! The receipt key: `(source_scope, event_id)`. Newtypes keep the two halves from swapping.
//! And the content key of integrations that deduplicate by content: the body's SHA-256.

use std::fmt;

/// The event-ID namespace, derived only from verified data: the integration id, the
/// provider account/installation/team and the mode. Two deliveries collide only when they
/// share both this scope and the event id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SourceScope(String);

impl SourceScope {
    /// Joins the parts with `/`. Parts are escaped so that `a/b` + `c` never equals `a` + `b/c`.
    pub fn from_parts<'a>(parts: impl IntoIterator<Item = &'a str>) -> Self {
        let escaped: Vec<String> = parts
            .into_iter()
            .map(|part| part.replace('%', "%25").replace('/', "%2F"))
            .collect();
        Self(escaped.join("/"))
    }

    /// The integration id a stored scope begins with (its first part, unescaped).
    pub fn first_part(stored: &str) -> String {
        let first = stored.split('/').next().unwrap_or_default();
        first.replace("%2F", "/").replace("%25", "%")
    }

    /// The scope as stored in `receipts.source_scope`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SourceScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// The provider's id for one event (Stripe `evt_…`, GitHub delivery GUID, …).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventId(String);

impl EventId {
    /// Wraps a provider event id. Callers have already rejected empty ids.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id as stored in `receipts.event_id`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// A lease's fencing token: one sequence for every claim of a receipt or an effect, never
/// reused, so a worker that lost its lease (and any earlier life of the row before a
/// replay) can never match it. A type of its own so that it is never passed where an id
/// is meant, or the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
#[serde(transparent)]
pub struct LeaseToken(i64);

impl fmt::Display for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A claimed receipt and the token its claim holds: what fences the business
/// transaction and every statement after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiptLease {
    /// `receipts.id`.
    pub receipt_id: ReceiptId,
    /// The claim's token.
    pub token: LeaseToken,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tables align ids and keys with `{:>10}` and `{:<20}`: their Display honours width.
    #[test]
    fn ids_and_keys_honour_width_and_alignment() {
        assert_eq!(format!("{:>6}|", ReceiptId(42)), "    42|");
        assert_eq!(format!("{:<6}|", EffectId(7)), "7     |");
        assert_eq!(format!("{:>6}|", LeaseToken(3)), "     3|");
        assert_eq!(format!("{:<8}|", EventId::new("evt_1")), "evt_1   |");
        assert_eq!(
            format!("{:<8}|", SourceScope::from_parts(["a", "b"])),
            "a/b     |"
        );
    }

    #[test]
    fn the_first_part_of_a_stored_scope_is_its_integration() {
        let scope = SourceScope::from_parts(["stripe-acme", "acct/1", "live"]);
        assert_eq!(SourceScope::first_part(scope.as_str()), "stripe-acme");
        assert_eq!(SourceScope::first_part("std-acme"), "std-acme");
        assert_eq!(
            SourceScope::first_part(SourceScope::from_parts(["a%/b", "x"]).as_str()),
            "a%/b"
        );
    }

    #[test]
    fn scope_parts_cannot_be_confused_by_embedded_separators() {
        let left = SourceScope::from_parts(["a/b", "c"]);
        let right = SourceScope::from_parts(["a", "b/c"]);
        assert_ne!(left, right);
        assert_eq!(left.as_str(), "a%2Fb/c");
    }
}

/// The content key: the SHA-256 of the raw body, as `receipts.content_digest` stores it.
pub fn content_digest(body: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(body).into()
}

/// `receipts.id`. A type of its own so that a receipt id is never passed where an
/// effect id or a lease token is meant; stored and serialized as the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
#[serde(transparent)]
pub struct ReceiptId(pub i64);

impl fmt::Display for ReceiptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The number's own Display honours width and alignment.
        self.0.fmt(f)
    }
}

impl std::str::FromStr for ReceiptId {
    type Err = std::num::ParseIntError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse().map(Self)
    }
}

/// `effects.id`, as [`ReceiptId`] is a receipt's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
#[serde(transparent)]
pub struct EffectId(pub i64);

impl fmt::Display for EffectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for EffectId {
    type Err = std::num::ParseIntError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse().map(Self)
    }
}
