//! Moving an installation made before inbound had its own schema into it.
//!
//! Installations migrated by the pre-schema migrations (`migrations/legacy`, versions
//! 1–10) hold inbound's tables in the connection's default schema (usually `public`),
//! with the history in `_sqlx_migrations` there. Before the first migration into the
//! configured schema, [`from_legacy`] finds such an installation and, in one
//! transaction, moves every object of inbound's into the schema (tables carry their
//! indexes, constraints and identity sequences with them), renames the old history to
//! `inbound_legacy_migrations` where it was (kept for the record; the reference domain's
//! tables stay beside it until the example crate's own migration adopts them), and
//! records the baseline migration as applied — it describes exactly the state moved. A
//! crash anywhere rolls all of it back, and the next run starts over.

use sqlx::migrate::Migrator;
use sqlx::{Connection, PgConnection};

use super::Schema;
use super::migrations::{MigrationError, create_schema_if_missing};

/// The last version of the pre-schema migrations: only an installation there is moved.
pub const LEGACY_LAST_VERSION: i64 = 10;

/// How the pre-schema history names its first migration (`0001_receipts.sql`).
const LEGACY_FIRST_DESCRIPTION: &str = "receipts";

/// The name the pre-schema history is kept under, in its old schema.
pub const LEGACY_HISTORY: &str = "inbound_legacy_migrations";

/// inbound's tables and sequences as the pre-schema migrations left them.
const LEGACY_TABLES: &[&str] = &[
    "receipts",
    "receipt_queue",
    "receipt_replays",
    "receipt_resolutions",
    "effects",
    "effect_attempts",
    "effect_resolutions",
];
const LEGACY_SEQUENCES: &[&str] = &["receipt_lease_tokens"];

/// Moves a pre-schema installation into `schema` when there is one and `schema` has no
/// history yet; returns the schema it came from. A pre-schema installation beside a
/// `schema` that has a history is refused (an older release rolled back to created it). `migrator` is inbound's own (its first
/// migration is the baseline). Run under the migration lock.
pub async fn from_legacy(
    connection: &mut PgConnection,
    schema: &Schema,
    migrator: &Migrator,
) -> Result<Option<String>, MigrationError> {
    let migrated =
        super::migrations::table_exists(connection, &schema.qualify("_sqlx_migrations")).await?;
    let legacy_candidates = legacy_installations(connection, schema).await?;
    if migrated {
        // A pre-schema installation beside a moved one: the previous release migrated
        // again after the move (a rollback), and whatever it accepted since is there.
        return match legacy_candidates.first() {
            None => Ok(None),
            Some(legacy) => Err(MigrationError::Refused(format!(
                "schema {legacy} holds an installation of the pre-schema layout beside the one in \
                 {schema}: a previous release migrated after the move, and receipts it accepted \
                 are there; move its pending receipts into {schema} by hand (or drop it when it \
                 holds nothing), then migrate again"
            ))),
        };
    }
    let legacy = match legacy_candidates.as_slice() {
        [] => return Ok(None),
        [one] => one.clone(),
        many => {
            return Err(MigrationError::Refused(format!(
                "found pre-schema installations in several schemas ({}); move the one to keep by hand",
                many.join(", ")
            )));
        }
    };
    let legacy_schema: Schema = legacy.parse().map_err(|_| {
        MigrationError::Refused(format!(
            "the pre-schema installation is in schema {legacy:?}, whose name inbound cannot use; rename it"
        ))
    })?;
    check_fully_migrated(connection, &legacy_schema).await?;
    move_into(connection, &legacy_schema, schema, migrator).await?;
    Ok(Some(legacy))
}

/// Schemas other than `schema` (and ones we may read) holding an installation the
/// pre-schema migrations made: our queue, and a history whose first migration is theirs
/// (the schema of another installation made by these migrations is not a legacy one).
async fn legacy_installations(
    connection: &mut PgConnection,
    schema: &Schema,
) -> Result<Vec<String>, MigrationError> {
    let candidates = sqlx::query_scalar!(
        r#"SELECT n.nspname::text AS "schema!" FROM pg_namespace n
         WHERE n.nspname <> $1 AND has_schema_privilege(n.oid, 'USAGE')
           AND EXISTS (SELECT 1 FROM pg_class c WHERE c.relnamespace = n.oid
                       AND c.relname = 'receipt_queue' AND c.relkind = 'r')
           AND EXISTS (SELECT 1 FROM pg_class c WHERE c.relnamespace = n.oid
                       AND c.relname = '_sqlx_migrations' AND c.relkind = 'r')
         ORDER BY 1"#,
        schema.as_str()
    )
    .fetch_all(&mut *connection)
    .await?;
    let mut legacy = Vec::new();
    for candidate in candidates {
        let Ok(candidate_schema) = candidate.parse::<Schema>() else {
            legacy.push(candidate);
            continue;
        };
        #[expect(
            clippy::disallowed_methods,
            reason = "Runtime SQL: the history's table is in a schema found only now."
        )]
        let first: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT description FROM {} WHERE version = 1",
            candidate_schema.qualify("_sqlx_migrations")
        )))
        .fetch_optional(&mut *connection)
        .await?;
        if first.as_deref() == Some(LEGACY_FIRST_DESCRIPTION) {
            legacy.push(candidate);
        }
    }
    Ok(legacy)
}

/// Refuses to move an installation the pre-schema migrations did not finish.
async fn check_fully_migrated(
    connection: &mut PgConnection,
    legacy_schema: &Schema,
) -> Result<(), MigrationError> {
    #[expect(
        clippy::disallowed_methods,
        reason = "Runtime SQL: the history's table is in a schema found only now."
    )]
    let (last, applied): (Option<i64>, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT max(version), count(*) FILTER (WHERE success) FROM {}",
        legacy_schema.qualify("_sqlx_migrations")
    )))
    .fetch_one(&mut *connection)
    .await?;
    if last != Some(LEGACY_LAST_VERSION) || applied != LEGACY_LAST_VERSION {
        return Err(MigrationError::Refused(format!(
            "the installation in schema {legacy_schema} is at migration {} of the pre-schema layout \
             (moving needs {LEGACY_LAST_VERSION}); apply the previous release's `inboundctl migrate` first",
            last.map_or_else(|| "none".to_owned(), |version| version.to_string())
        )));
    }
    Ok(())
}

/// Moves the legacy tables and sequence into `schema`, keeps the old history under
/// another name, and records the baseline as applied — in one transaction, so a crash
/// leaves either the old layout or the new one.
async fn move_into(
    connection: &mut PgConnection,
    legacy_schema: &Schema,
    schema: &Schema,
    migrator: &Migrator,
) -> Result<(), MigrationError> {
    let mut transaction = connection.begin().await?;
    create_schema_if_missing(&mut transaction, schema).await?;
    let tables = LEGACY_TABLES.iter().map(|table| ("TABLE", table));
    let sequences = LEGACY_SEQUENCES
        .iter()
        .map(|sequence| ("SEQUENCE", sequence));
    let mut statements: Vec<String> = tables
        .chain(sequences)
        .map(|(kind, name)| {
            format!(
                "ALTER {kind} {} SET SCHEMA {}",
                legacy_schema.qualify(name),
                schema.quoted()
            )
        })
        .collect();
    statements.push(format!(
        "ALTER TABLE {} RENAME TO {LEGACY_HISTORY}",
        legacy_schema.qualify("_sqlx_migrations")
    ));
    for statement in statements {
        #[expect(
            clippy::disallowed_methods,
            reason = "Runtime SQL: DDL takes no parameters; every name is quoted by Schema."
        )]
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(&mut *transaction)
            .await?;
    }
    // The baseline describes the state just moved: record it as applied.
    migrator
        .run_direct(Some(BASELINE_VERSION), &mut *transaction, true)
        .await?;
    transaction.commit().await?;
    Ok(())
}

/// The version of inbound's first migration in its own schema.
const BASELINE_VERSION: i64 = 1;
