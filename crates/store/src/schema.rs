//! The PostgreSQL schema that holds inbound's own objects (`inbound` unless configured).
//!
//! Every connection inbound opens sets `search_path` to this schema alone, so its
//! unqualified statements can only ever name its own tables — never a team's table that
//! happens to share a name in `public`. Business handlers qualify their own tables.

use std::fmt;
use std::str::FromStr;

/// The default schema name.
pub const DEFAULT_SCHEMA: &str = "inbound";

/// The schema of the example domain (`inbound-example`), never inbound's own.
const EXAMPLE_SCHEMA: &str = "inbound_example";

/// A schema name inbound may use: lower-case ASCII letters, digits and `_`, starting with a
/// letter or `_`, at most 63 bytes (PostgreSQL's identifier limit), never `pg_…` or
/// `information_schema` — so it is one identifier that needs no escaping anywhere.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Schema(String);

impl Schema {
    /// The name as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as a quoted identifier (`"inbound"`), safe in any statement even when it
    /// is a reserved word.
    pub fn quoted(&self) -> String {
        format!("\"{}\"", self.0)
    }

    /// `"schema".name`.
    pub(crate) fn qualify(&self, name: &str) -> String {
        format!("{}.{name}", self.quoted())
    }
}

impl Default for Schema {
    fn default() -> Self {
        Self(DEFAULT_SCHEMA.to_owned())
    }
}

impl fmt::Display for Schema {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// Why a schema name was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid schema name {name:?}: {rule}")]
pub struct InvalidSchema {
    name: String,
    rule: &'static str,
}

const NAME_RULE: &str = "use 1 to 63 lower-case letters, digits or _, starting with a letter or _, not pg_… or information_schema";

impl Schema {
    /// The schema for inbound's own objects (`--schema`): any valid name but `public`,
    /// which is the team's — inbound never creates anything there — and
    /// `inbound_example`, the example domain's (its history would collide).
    pub fn parse_own(name: &str) -> Result<Self, InvalidSchema> {
        let schema: Self = name.parse()?;
        let refused = match schema.0.as_str() {
            "public" => "inbound never creates anything in public; name a schema of its own",
            EXAMPLE_SCHEMA => "it is the example domain's schema; name another",
            _ => return Ok(schema),
        };
        Err(InvalidSchema {
            name: name.to_owned(),
            rule: refused,
        })
    }
}

impl FromStr for Schema {
    type Err = InvalidSchema;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let mut bytes = name.bytes();
        let first_ok = bytes
            .next()
            .is_some_and(|byte| byte.is_ascii_lowercase() || byte == b'_');
        let rest_ok =
            bytes.all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_');
        let reserved = name.starts_with("pg_") || name == "information_schema";
        if first_ok && rest_ok && name.len() <= 63 && !reserved {
            Ok(Self(name.to_owned()))
        } else {
            Err(InvalidSchema {
                name: name.to_owned(),
                rule: NAME_RULE,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_identifiers_are_accepted_and_quoted() {
        let schema: Schema = "billing_inbound2".parse().expect("valid");
        assert_eq!(schema.quoted(), "\"billing_inbound2\"");
        assert_eq!(schema.qualify("receipts"), "\"billing_inbound2\".receipts");
        assert_eq!(Schema::default().as_str(), "inbound");
        let reserved: Schema = "user".parse().expect("a reserved word is fine quoted");
        assert_eq!(reserved.quoted(), "\"user\"");
    }

    #[test]
    fn anything_that_would_need_escaping_is_refused() {
        for name in [
            "",
            "Inbound",
            "1st",
            "in-bound",
            "in bound",
            "in\"bound",
            "pg_catalog",
            "information_schema",
            &"a".repeat(64),
        ] {
            assert!(name.parse::<Schema>().is_err(), "{name:?}");
        }
    }

    #[test]
    fn inbound_never_takes_public_for_its_own() {
        assert!(
            "public".parse::<Schema>().is_ok(),
            "another crate's schema may be public"
        );
        let error = Schema::parse_own("public").expect_err("refused");
        assert!(
            error
                .to_string()
                .contains("never creates anything in public")
        );
        assert!(Schema::parse_own("inbound_example").is_err());
        assert_eq!(Schema::parse_own("inbound"), Ok(Schema::default()));
    }
}
