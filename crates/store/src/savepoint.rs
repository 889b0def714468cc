//! The savepoint before a run of handler calls in the worker's business transaction:
//! only an `Applied` verdict commits what a handler wrote, so a run with another verdict
//! is rolled back to it. One round trip to set; none to keep (the commit releases it), one
//! to roll back to. Set again before each run, it shadows the one before (the name refers
//! to the newest), so a batch nests at most one per run of receipts.

use sqlx::PgConnection;

/// Sets the savepoint the run's writes are rolled back to when a verdict is not `Applied`.
#[expect(
    clippy::disallowed_methods,
    reason = "Transaction control, as sqlx's own savepoints: a fixed simple-protocol statement with nothing to check."
)]
pub async fn before_handlers(transaction: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::raw_sql("SAVEPOINT inbound_handlers")
        .execute(transaction)
        .await?;
    Ok(())
}

/// Undoes everything written since [`before_handlers`] (the savepoint stays set).
#[expect(
    clippy::disallowed_methods,
    reason = "Transaction control, as sqlx's own savepoints: a fixed simple-protocol statement with nothing to check."
)]
pub async fn undo_handlers(transaction: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::raw_sql("ROLLBACK TO SAVEPOINT inbound_handlers")
        .execute(transaction)
        .await?;
    Ok(())
}
