//! Least privilege per process: one login role each for the ingress, the worker, a
//! separately run dispatcher and operators, holding only what that process does, and the
//! session settings a transaction pooler cannot carry (`search_path`,
//! `synchronous_commit`, `statement_timeout`) attached to the role in this database.
//!
//! None of them owns a table, so none can drop or alter one; the migrating role keeps
//! ownership. The ingress cannot read a payload, update a receipt, pick an id or touch a
//! business table; the worker changes a receipt's state, never what was received; the
//! dispatcher cannot read payloads either; operators read everything and change receipts
//! and effects only through the database's decision, retention and backfill functions,
//! each audited in its own statement; and the audit trail (`receipt_replays`,
//! `receipt_resolutions`, `effect_resolutions`, `payload_reads`) is insert-only for every
//! role, its time and database role the server's. The
//! statements are idempotent and are re-run after every migration (`inboundctl migrate
//! --create-roles`), so a new table is granted as it arrives. Passwords are not ours to choose: the roles are created
//! without one (`ALTER ROLE … PASSWORD`, certificates or a cloud IAM log them in).

use sqlx::PgConnection;

use super::Schema;

/// What each process may do, with `{schema}` standing for inbound's quoted schema.
const GRANTS: &[(Process, &[&str])] = &[
    (
        Process::Ingress,
        &[
            // The group commit inserts a receipt and its queue row and reads back, by
            // RETURNING, only what identifies the rows it inserted. Only the columns it
            // writes: an id or an acceptance time is the database's, never the caller's
            // (an id taken ahead would turn a later receipt into a silent duplicate).
            "GRANT INSERT (integration, source_scope, event_id, event_type, route_key, content_digest, delivery, subject, event_at, ordered) ON {schema}.receipts TO {role}",
            "GRANT INSERT ON {schema}.receipt_payloads TO {role}",
            // A receipt's id is its day and the next of these (the column's default).
            "GRANT USAGE ON SEQUENCE {schema}.receipt_serials TO {role}",
            // Keys are claimed (claim_receipt_keys) by looking in the previous period first.
            "GRANT SELECT, INSERT ON {schema}.receipt_keys TO {role}",
            "GRANT INSERT (receipt_id, integration, visible_at, enqueued_at, payload_bytes, subject, ordered_at) ON {schema}.receipt_queue TO {role}",
            // The queue ages that page and scale, which the ingress exports so that they
            // outlive every worker: when rows became claimable and whether an ordered
            // subject is held, never what they hold.
            "GRANT SELECT (id, integration, source_scope, event_id, received_at) ON {schema}.receipts TO {role}",
            "GRANT SELECT (integration, visible_at, enqueued_at, leased_by, subject) ON {schema}.receipt_queue TO {role}",
            "GRANT SELECT (integration, subject, leased_until) ON {schema}.subject_leases TO {role}",
        ],
    ),
    (
        Process::Worker,
        &[
            // Receipts change state but are never inserted or removed (purge is an
            // operator's), and what was received — payload, key, acceptance time — is
            // never rewritten; queue rows are fenced away and released; intents are
            // written and, with `--role all`, delivered. Operators' decisions it only
            // reads (an operator's retry ends a sink's breaker pause).
            "GRANT SELECT ON {schema}.receipts, {schema}.receipt_payloads TO {role}",
            "GRANT UPDATE (status, outcome, outcome_reason, attempts, last_error, finished_at) ON {schema}.receipts TO {role}",
            "GRANT SELECT, UPDATE, DELETE ON {schema}.receipt_queue TO {role}",
            // An ordered subject's mutex: taken by a claim, given back with its head.
            "GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.subject_leases TO {role}",
            "GRANT SELECT, INSERT, UPDATE ON {schema}.effects, {schema}.effect_attempts TO {role}",
            // An operator's retry of a paused sink's effect ends its breaker's pause.
            "GRANT SELECT ON {schema}.effect_resolutions TO {role}",
            "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
            // Partitions are created ahead by the workers (the function is the owner's).
            "GRANT EXECUTE ON FUNCTION {schema}.ensure_history_partitions(timestamptz, integer) TO {role}",
            // The gauge of rows a missing partition left in a default one.
            "GRANT SELECT ON {schema}.receipts_default, {schema}.receipt_payloads_default, {schema}.effects_default, {schema}.effect_attempts_default TO {role}",
        ],
    ),
    (
        Process::Dispatcher,
        &[
            "GRANT SELECT, UPDATE ON {schema}.effects TO {role}",
            "GRANT SELECT, INSERT, UPDATE ON {schema}.effect_attempts TO {role}",
            "GRANT SELECT ON {schema}.effect_resolutions TO {role}",
            "GRANT SELECT ON {schema}.receipt_queue TO {role}",
            "GRANT SELECT (id, integration, source_scope, event_id, event_type, status, received_at) ON {schema}.receipts TO {role}",
            "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
        ],
    ),
    (
        Process::Operator,
        &[
            // Operators read everything, and change receipts and effects only through
            // the database's functions, each checked against the state machine and
            // audited in the same statement (migrations/0001_inbound.sql): no receipt,
            // queue row or effect is written by the role itself, so no decision goes
            // unrecorded and nothing leaves but by retention's rule. The audit trail's
            // time and database role are the server's (column defaults).
            "GRANT SELECT ON {schema}.receipts, {schema}.receipt_payloads, {schema}.receipt_keys, {schema}.receipt_queue, {schema}.subject_leases, {schema}.effects, {schema}.effect_attempts TO {role}",
            "GRANT SELECT ON {schema}.receipt_replays, {schema}.receipt_resolutions, {schema}.effect_resolutions, {schema}.payload_reads TO {role}",
            "GRANT INSERT (receipt_id, read_by, surface) ON {schema}.payload_reads TO {role}",
            "GRANT EXECUTE ON FUNCTION {operator_functions} TO {role}",
        ],
    ),
];

/// The database's functions the operator role calls: retention, decisions and backfill
/// (migrations/0001_inbound.sql; `EXECUTE` is revoked from `PUBLIC` there).
const OPERATOR_FUNCTIONS: &[&str] = &[
    "drop_payload_days(integer)",
    "drop_key_periods(integer)",
    "drop_detached_history()",
    "decision_lock_receipt(bigint)",
    "decision_make_receipt_due(bigint, text, text)",
    "decision_requeue_receipt(bigint, text, text)",
    "decision_take_receipt_out(bigint, text, text, text)",
    "release_subject_hold(bigint)",
    "decision_close_receipt(bigint, text, text)",
    "decision_lock_effect(bigint)",
    "decision_resolve_effect(bigint, text, text, text)",
    "backfill_receipts(text[], text[], text[], text[], text[], text[], text[], text[], timestamptz[], boolean[])",
];

/// The processes that get a role of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    /// `inbound-ingress`.
    Ingress,
    /// `inbound-worker --role receipts|all`.
    Worker,
    /// `inbound-worker --role effects`.
    Dispatcher,
    /// `inboundctl`'s operating commands.
    Operator,
}

impl Process {
    /// Every process, in the order roles are created.
    pub const ALL: [Self; 4] = [
        Self::Ingress,
        Self::Worker,
        Self::Dispatcher,
        Self::Operator,
    ];

    fn suffix(self) -> &'static str {
        match self {
            Self::Ingress => "ingress",
            Self::Worker => "worker",
            Self::Dispatcher => "dispatcher",
            Self::Operator => "operator",
        }
    }

    /// The bound a statement may run for, as the binaries' default
    /// `--db-statement-timeout-ms` and `inboundctl`'s `--statement-timeout-secs`: behind a
    /// transaction pooler only the role carries it (purge works in bounded batches, so
    /// no statement of an operator's needs longer).
    fn statement_timeout(self) -> &'static str {
        match self {
            Self::Ingress | Self::Worker | Self::Dispatcher => "5s",
            Self::Operator => "60s",
        }
    }
}

/// The prefix of the role names (`inbound_` gives `inbound_ingress`, …): lower-case
/// letters, digits and `_`, so that names need no escaping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolePrefix(String);

impl RolePrefix {
    /// The default prefix.
    pub const DEFAULT: &'static str = "inbound_";

    /// Checks `prefix`.
    pub fn parse(prefix: &str) -> Result<Self, String> {
        let valid = !prefix.is_empty()
            && prefix.len() <= 40
            && prefix.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && !prefix.starts_with("pg_")
            && prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        valid.then(|| Self(prefix.to_owned())).ok_or_else(|| {
            format!(
                "invalid role prefix {prefix:?}: use 1 to 40 lower-case letters, digits or _, starting with a letter or _, not pg_"
            )
        })
    }

    /// The role of `process`.
    pub fn role(&self, process: Process) -> String {
        format!("{}{}", self.0, process.suffix())
    }
}

impl Default for RolePrefix {
    fn default() -> Self {
        Self(Self::DEFAULT.to_owned())
    }
}

/// The statements that create (when missing) and grant every role, for inbound's tables
/// in `schema` and the business tables of `business_schemas` (granted to the worker:
/// what the team's handlers write), in database `database`.
pub fn statements(
    schema: &Schema,
    prefix: &RolePrefix,
    database: &str,
    business_schemas: &[Schema],
) -> Vec<String> {
    let database = quote_identifier(database);
    let mut statements = Vec::new();
    for process in Process::ALL {
        let role = prefix.role(process);
        statements.push(format!(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN CREATE ROLE {role} LOGIN; END IF; END $$"
        ));
        statements.push(format!(
            "GRANT USAGE ON SCHEMA {} TO {role}",
            schema.quoted()
        ));
        // What a previous run (or a person) granted beyond this list is taken back, so
        // that narrowing a grant in a later version takes effect (a table's REVOKE takes
        // its columns' privileges too).
        for kind in ["TABLES", "SEQUENCES", "FUNCTIONS"] {
            statements.push(format!(
                "REVOKE ALL ON ALL {kind} IN SCHEMA {} FROM {role}",
                schema.quoted()
            ));
        }
        for (_, grants) in GRANTS.iter().filter(|(owner, _)| *owner == process) {
            let functions = OPERATOR_FUNCTIONS
                .iter()
                .map(|function| schema.qualify(function))
                .collect::<Vec<_>>()
                .join(", ");
            statements.extend(grants.iter().map(|grant| {
                grant
                    .replace("{operator_functions}", &functions)
                    .replace("{schema}", &schema.quoted())
                    .replace("{role}", &role)
            }));
        }
        // The migrations' own bookkeeping is for the migrating role alone.
        statements.push(revoke_migration_history(schema, &role));
        if process == Process::Worker {
            for business in business_schemas {
                let quoted = business.quoted();
                statements.push(format!("GRANT USAGE ON SCHEMA {quoted} TO {role}"));
                statements.push(format!(
                    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {quoted} TO {role}"
                ));
                statements.push(format!(
                    "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {quoted} TO {role}"
                ));
                statements.push(revoke_migration_history(business, &role));
            }
        }
        for (setting, value) in [
            ("search_path", super::search_path(schema)),
            ("synchronous_commit", "on".to_owned()),
            (
                "statement_timeout",
                format!("'{}'", process.statement_timeout()),
            ),
            (
                "idle_in_transaction_session_timeout",
                format!(
                    "'{}s'",
                    super::bounded::IDLE_IN_TRANSACTION_TIMEOUT.as_secs()
                ),
            ),
        ] {
            statements.push(format!(
                "ALTER ROLE {role} IN DATABASE {database} SET {setting} = {value}"
            ));
        }
    }
    statements
}

/// The schemas of `schemas` that do not exist (yet): granting one would fail with a
/// permission-sounding error, so callers name them first.
pub async fn missing_schemas(
    connection: &mut PgConnection,
    schemas: &[Schema],
) -> Result<Vec<Schema>, sqlx::Error> {
    let names: Vec<String> = schemas
        .iter()
        .map(|schema| schema.as_str().to_owned())
        .collect();
    let present = sqlx::query_scalar!(
        r#"SELECT nspname::text AS "name!" FROM pg_namespace WHERE nspname = ANY ($1)"#,
        &names,
    )
    .fetch_all(&mut *connection)
    .await?;
    Ok(schemas
        .iter()
        .filter(|schema| !present.iter().any(|name| name == schema.as_str()))
        .cloned()
        .collect())
}

/// Runs [`statements`] for the connection's database, in one transaction. Needs a role
/// that may create roles (`CREATEROLE`) and owns the tables (the migrating role).
pub async fn create_roles(
    connection: &mut PgConnection,
    schema: &Schema,
    prefix: &RolePrefix,
    business_schemas: &[Schema],
) -> Result<Vec<String>, sqlx::Error> {
    use sqlx::Connection;
    let database = sqlx::query_scalar!(r#"SELECT current_database()::text AS "database!""#)
        .fetch_one(&mut *connection)
        .await?;
    let mut transaction = connection.begin().await?;
    for statement in statements(schema, prefix, &database, business_schemas) {
        #[expect(
            clippy::disallowed_methods,
            reason = "Runtime SQL: DDL and grants take no parameters; every name is quoted."
        )]
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(&mut *transaction)
            .await?;
    }
    transaction.commit().await?;
    Ok(Process::ALL
        .iter()
        .map(|&process| prefix.role(process))
        .collect())
}

/// Takes `schema`'s migration history (`_sqlx_migrations`, where there is one) from `role`.
fn revoke_migration_history(schema: &Schema, role: &str) -> String {
    let table = schema.qualify("_sqlx_migrations");
    format!(
        "DO $$ BEGIN IF to_regclass('{table}') IS NOT NULL THEN REVOKE ALL ON {table} FROM {role}; END IF; END $$"
    )
}

/// `name` as a quoted identifier.
fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
