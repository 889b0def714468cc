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
    use inbound_core::states::{EffectAction, ReceiptAction};
    let database = TestDatabase::create().await;
    assert_eq!(
        allowed_values(&database, "effect_resolutions", "action").await,
        names(EffectAction::names())
    );
    // A replay is a row of `receipt_replays`; every other decision one of these.
    assert_eq!(
        allowed_values(&database, "receipt_resolutions", "action").await,
        names(ReceiptAction::names().filter(|action| *action != ReceiptAction::Replay.as_str()))
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

/// The state names a text compares a `status` or `outcome` column with, or sets it to:
/// `status = 'x'`, `status <> 'x'`, `status IN ('x', 'y')`, and the `THEN`/`ELSE` arms of a
/// `status = CASE …`, each with whatever table alias precedes the column.
fn state_literals(text: &str) -> Vec<String> {
    let quoted_after = |rest: &str| -> Vec<String> {
        // The literals of `'x'` or `('x', 'y')` at the start of `rest`.
        let rest = rest.trim_start();
        let list = match rest.strip_prefix('(') {
            Some(inside) => inside.split(')').next().unwrap_or_default(),
            None => rest.split([' ', ',', '\n', ')']).next().unwrap_or_default(),
        };
        list.split(',')
            .map(str::trim)
            .filter_map(|item| item.strip_prefix('\'')?.strip_suffix('\''))
            .map(str::to_owned)
            .collect()
    };
    let mut found = Vec::new();
    for column in ["status", "outcome"] {
        for (index, _) in text.match_indices(column) {
            let before = text[..index].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &text[index + column.len()..];
            if rest.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = rest.trim_start();
            let compared = ["<>", "=", "IN"]
                .iter()
                .find_map(|operator| rest.strip_prefix(operator));
            let Some(operand) = compared else { continue };
            if let Some(case) = operand.trim_start().strip_prefix("CASE") {
                let case = case.split("END").next().unwrap_or_default();
                for arm in ["THEN", "ELSE"] {
                    for (at, _) in case.match_indices(arm) {
                        found.extend(quoted_after(&case[at + arm.len()..]));
                    }
                }
            } else {
                found.extend(quoted_after(operand));
            }
        }
    }
    found
}

#[test]
fn a_state_named_in_sql_is_one_the_code_knows() {
    // The rule catches what it should, on a made-up statement.
    assert_eq!(
        state_literals(
            "UPDATE receipts r SET status = CASE $2 WHEN 'x' THEN 'quarantined' ELSE 'failed' END
             WHERE r.status IN ('pending', 'done') AND outcome <> 'ignored' AND status_code = 3"
        ),
        ["quarantined", "failed", "pending", "done", "ignored"]
    );
    let known: BTreeSet<String> = names(
        ReceiptStatus::names()
            .chain(ReceiptOutcome::names())
            .chain(EffectStatus::names()),
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    let mut pending = vec![
        root.join("crates/store/src"),
        root.join("crates/store/queries"),
        root.join("migrations"),
    ];
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).expect("a directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path
                .extension()
                .is_some_and(|extension| extension == "rs" || extension == "sql")
            {
                files.push(path);
            }
        }
    }
    let mut checked = 0;
    let mut unknown = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source");
        for literal in state_literals(&text) {
            checked += 1;
            if !known.contains(&literal) {
                unknown.push(format!("{}: '{literal}'", file.display()));
            }
        }
    }
    assert!(checked > 30, "only {checked} state literals found");
    assert!(
        unknown.is_empty(),
        "states the code does not know: {unknown:?}"
    );
}
