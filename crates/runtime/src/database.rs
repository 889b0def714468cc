//! A process's units of database work: a connection from the pool (its wait recorded and
//! bounded by the pool's acquire timeout), then the work on it, bounded on the client
//! (`inbound_store::bounded`): a database that goes silent costs each caller at
//! most its limit, and the connection is closed rather than returned.

use std::time::Duration;

use sqlx::{PgConnection, PgPool};

/// Acquires a connection from `pool` and runs `work` on it within `limit`.
pub async fn with_connection<T>(
    pool: &PgPool,
    limit: Duration,
    work: impl AsyncFnOnce(&mut PgConnection) -> Result<T, sqlx::Error>,
) -> Result<T, sqlx::Error> {
    let mut connection = crate::process_metrics::acquire(pool).await?;
    inbound_store::bounded::within(&mut connection, limit, work).await
}
