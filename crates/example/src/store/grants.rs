//! The reference `entitlement_grants` table: one row per business key
//! `(tenant, invoice, entitlement)`; the customer is a column (an invoice has one).

use sqlx::PgConnection;

/// One grant's business key.
#[derive(Debug, Clone, Copy)]
pub struct Grant<'a> {
    /// The tenant of the integration.
    pub tenant: &'a str,
    /// The Stripe customer.
    pub account_id: &'a str,
    /// The Stripe invoice.
    pub invoice_id: &'a str,
    /// The entitlement name mapped from a price.
    pub entitlement: &'a str,
}

/// Inserts the grant unless the invoice already granted this entitlement; `true` when it
/// was new.
pub async fn insert(
    conn: &mut PgConnection,
    grant: Grant<'_>,
    receipt_id: i64,
) -> Result<bool, sqlx::Error> {
    // The business key's UNIQUE index decides; a concurrent twin waits for this transaction.
    let inserted = sqlx::query!(
        "INSERT INTO inbound_example.entitlement_grants (tenant_id, account_id, invoice_id, entitlement, receipt_id)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (tenant_id, invoice_id, entitlement) DO NOTHING",
        grant.tenant,
        grant.account_id,
        grant.invoice_id,
        grant.entitlement,
        receipt_id,
    )
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

/// Another customer an invoice's grants name, if any (an invoice has one customer).
pub async fn other_customer_of_invoice(
    conn: &mut PgConnection,
    tenant: &str,
    invoice_id: &str,
    customer: &str,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT account_id FROM inbound_example.entitlement_grants
         WHERE tenant_id = $1 AND invoice_id = $2 AND account_id <> $3 LIMIT 1",
        tenant,
        invoice_id,
        customer,
    )
    .fetch_optional(conn)
    .await
}

/// Serialises the grants of one invoice until the transaction ends (an advisory lock on
/// the invoice key: the grants themselves may not exist yet to be locked).
pub async fn lock_invoice(
    conn: &mut PgConnection,
    tenant: &str,
    invoice_id: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT pg_advisory_xact_lock(hashtextextended('inbound_example.grants:' || $1 || ':' || $2, 0))",
        tenant,
        invoice_id,
    )
    .fetch_one(conn)
    .await
    .map(|_| ())
}
