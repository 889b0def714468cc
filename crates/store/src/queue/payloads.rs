//! A claimed receipt's payload, read apart from the claim and decoded on its own: a
//! payload that cannot be read or decoded costs only its receipt.

use std::collections::HashMap;
use std::time::Duration;

use sqlx::PgConnection;

use crate::bounded::statement;
use inbound_core::keys::ReceiptId;
use inbound_core::payload;

/// A claimed receipt's payload.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredPayload {
    /// Decoded as every handler reads it ([`inbound_core::payload::decode`]).
    Decoded(serde_json::Value),
    /// Purged by retention (which never purges pending receipts).
    Purged,
    /// Stored, but not decodable (stored before the storability contract); the reason
    /// names the problem, never the content.
    Undecodable(String),
}

impl StoredPayload {
    fn from_text(text: Option<String>) -> Self {
        match text {
            None => Self::Purged,
            Some(text) => match payload::decode(&text) {
                Ok(value) => Self::Decoded(value),
                Err(error) => Self::Undecodable(error.to_string()),
            },
        }
    }
}

/// The payloads of `receipt_ids` as text, each decoded on its own. One statement reads
/// them all; when it fails on what one row's own data can cause (a payload stored before
/// the storability contract that PostgreSQL cannot render), each is read alone and the
/// one that fails is [`StoredPayload::Undecodable`], costing only its receipt. Any other
/// failure is the caller's (the claimed leases then expire).
pub(super) async fn stored_payloads(
    conn: &mut PgConnection,
    receipt_ids: &[ReceiptId],
    statement_limit: Duration,
) -> Result<HashMap<ReceiptId, StoredPayload>, sqlx::Error> {
    if receipt_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let decoded = |rows: Vec<(ReceiptId, Option<String>)>| {
        rows.into_iter()
            .map(|(id, text)| (id, StoredPayload::from_text(text)))
    };
    match statement(statement_limit, payload_texts(conn, receipt_ids)).await {
        Ok(rows) => Ok(decoded(rows).collect()),
        Err(error) if cannot_render_a_row(&error) => {
            let mut payloads = HashMap::with_capacity(receipt_ids.len());
            for &id in receipt_ids {
                match statement(statement_limit, payload_texts(conn, &[id])).await {
                    Ok(rows) => payloads.extend(decoded(rows)),
                    Err(error) if cannot_render_a_row(&error) => {
                        let reason = format!("the stored payload cannot be read: {error}");
                        payloads.insert(id, StoredPayload::Undecodable(reason));
                    }
                    Err(error) => return Err(error),
                }
            }
            Ok(payloads)
        }
        Err(error) => Err(error),
    }
}

/// `(receipt id, payload as text)` for each of `receipt_ids`.
async fn payload_texts(
    conn: &mut PgConnection,
    receipt_ids: &[ReceiptId],
) -> Result<Vec<(ReceiptId, Option<String>)>, sqlx::Error> {
    // `= ANY` of the ids, planned for them (never a generic plan, which would lock every
    // day's partition): only their days' partitions are read and locked.
    // Each row one text, `{receipt id} {payload}`: a scalar is what a statement planned
    // per call may return here.
    let rows = sqlx::query_scalar!(
        r#"SELECT receipt_id || ' ' || payload::text AS "row!"
         FROM receipt_payloads WHERE receipt_id = ANY ($1)"#,
        receipt_ids as &[ReceiptId],
    )
    .persistent(false)
    .fetch_all(conn)
    .await?;
    let mut texts: HashMap<ReceiptId, String> = rows
        .into_iter()
        .filter_map(|mut row| {
            let space = row.find(' ')?;
            let id = ReceiptId(row[..space].parse().ok()?);
            row.drain(..=space);
            Some((id, row))
        })
        .collect();
    // No row: retention dropped the payload's day.
    Ok(receipt_ids
        .iter()
        .map(|id| (*id, texts.remove(id)))
        .collect())
}

/// Whether PostgreSQL refused to render a row's value for the row's own sake: a data
/// error, a limit, or a string past the 1 GB a value may hold (reported as "out of
/// memory" with that detail — a real shortage of memory is not the row's fault).
pub(crate) fn cannot_render_a_row(error: &sqlx::Error) -> bool {
    let Some(database_error) = error.as_database_error() else {
        return false;
    };
    let code = database_error.code().unwrap_or_default();
    if code.starts_with("22") || code.starts_with("54") {
        return true;
    }
    code == "53200"
        && database_error
            .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
            .and_then(|error| error.detail())
            .is_some_and(|detail| detail.starts_with("Cannot enlarge string buffer"))
}
