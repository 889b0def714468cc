//! The states are written once (`inbound_core::states`) and enforced twice: by the Rust
//! enums and by the database's CHECK constraints. These tests read the constraints back
//! from a migrated database and fail when either side gains or loses a value, and check
//! that ARCHITECTURE.md's state machines name every state.

use std::collections::BTreeSet;

use inbound_core::states::{EffectStatus, ReceiptOutcome, ReceiptStatus};
use inbound_tests::TestDatabase;

/// The quoted values of the CHECK constraint on `table.column` that lists them.
async fn allowed_values(database: &TestDatabase, table: &str, column: &str) -> BTreeSet<String> {
    let definitions: Vec<String> = sqlx::query_scalar(
        "SELECT pg_get_constraintdef(c.oid)
         FROM pg_constraint c
         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
         WHERE c.contype = 'c' AND c.conrelid = $1::regclass AND a.attname = $2
           AND array_length(c.conkey, 1) = 1",
    )
    .bind(table)
    .bind(column)
    .fetch_all(database.pool())
    .await
    .expect("constraints");
    assert_eq!(definitions.len(), 1, "{table}.{column}: {definitions:?}");
    definitions[0]
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn names(values: impl Iterator<Item = &'static str>) -> BTreeSet<String> {
    values.map(str::to_owned).collect()
}

#[tokio::test]
async fn the_database_allows_exactly_the_states_the_code_knows() {
    let database = TestDatabase::create().await;
    assert_eq!(
        allowed_values(&database, "receipts", "status").await,
        names(ReceiptStatus::names())
    );
    assert_eq!(
        allowed_values(&database, "receipts", "outcome").await,
        names(ReceiptOutcome::names())
    );
    assert_eq!(
        allowed_values(&database, "effects", "status").await,
        names(EffectStatus::names())
    );
}

/// Operators' decisions are recorded under the actions the code names.
#[tokio::test]
async fn the_database_records_exactly_the_decisions_the_code_makes() {
    use inbound_store::{admin, effects};
    let database = TestDatabase::create().await;
    assert_eq!(
        allowed_values(&database, "effect_resolutions", "action").await,
        names(
            effects::Resolution::ALL
                .iter()
                .map(|resolution| resolution.action())
        )
    );
    assert_eq!(
        allowed_values(&database, "receipt_resolutions", "action").await,
        names(
            admin::PendingResolution::ALL
                .iter()
                .map(|resolution| resolution.action())
                .chain([admin::CLOSE_ACTION])
        )
    );
}

/// The text between a `## title` heading and the next one.
fn section<'a>(document: &'a str, title: &str) -> &'a str {
    let start = document
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section {title:?}"));
    let rest = &document[start + 1..];
    let end = rest[3..]
        .find("\n## ")
        .map_or(rest.len(), |index| index + 3);
    &rest[..end]
}

#[test]
fn the_state_machines_in_architecture_md_name_every_state() {
    let document =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../ARCHITECTURE.md"))
            .expect("ARCHITECTURE.md");
    let receipts = section(&document, "Receipt lifecycle");
    for state in ReceiptStatus::names().chain(ReceiptOutcome::names()) {
        assert!(
            receipts.contains(state),
            "the receipt lifecycle never names {state}"
        );
    }
    let effects = section(&document, "Effect lifecycle");
    for state in EffectStatus::names() {
        assert!(
            effects.contains(state),
            "the effect lifecycle never names {state}"
        );
    }
}
