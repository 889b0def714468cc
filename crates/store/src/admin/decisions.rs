//! What operators change about receipts, each decision recorded with who and why and
//! taken whole or not at all: replays, quarantining or failing pending receipts, closing
//! those that will never be processed. Each change of one receipt is one of the
//! database's decision functions (migrations/0001_inbound.sql), which check the state
//! machine and write the audit row with the change: the operator role writes no receipt
//! itself. Here: the order of the rows, the refusals, and one transaction for all.

use sqlx::{Connection, PgConnection};

use inbound_core::keys::ReceiptId;
use inbound_core::states::{ReceiptAction, ReceiptStatus};

/// Why a replay was refused. Nothing is replayed when any id is refused.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// No receipt has this id.
    #[error("receipt {0} does not exist")]
    Unknown(ReceiptId),
    /// Chosen by a filter on one status, it has moved on since.
    #[error(
        "receipt {id} is {status} now, no longer {expected}: list again (--dry-run) and decide on what is there"
    )]
    Moved {
        /// The receipt.
        id: ReceiptId,
        /// Its status now.
        status: ReceiptStatus,
        /// The status the filter selected it in.
        expected: ReceiptStatus,
    },
    /// Only failed, quarantined and pending receipts can be replayed.
    #[error(
        "receipt {id} is {status}; only failed or quarantined receipts (queued again) and pending ones (run now) can be replayed"
    )]
    WrongState {
        /// The receipt.
        id: ReceiptId,
        /// Its status.
        status: ReceiptStatus,
    },
    /// A worker holds the receipt's lease: it is being processed now.
    #[error("receipt {0} is being processed by a worker now; replay it if it comes back to wait")]
    Leased(ReceiptId),
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// Sends failed/quarantined receipts back to pending with attempts reset, and makes
/// pending ones waiting out a retry delay due now (attempts kept), recording who and why,
/// all in one transaction: either every id is replayed or none. With `expected`, each
/// must still be in that status (a replay chosen by a filter).
pub async fn replay(
    conn: &mut PgConnection,
    receipt_ids: &[ReceiptId],
    expected: Option<ReceiptStatus>,
    replayed_by: &str,
    reason: &str,
) -> Result<(), ReplayError> {
    let mut transaction = conn.begin().await?;
    for id in crate::in_lock_order(receipt_ids) {
        match locked_status(&mut transaction, id).await? {
            None => return Err(ReplayError::Unknown(id)),
            // Chosen by a filter on one status, and moved on since: not what was shown.
            Some(status)
                if let Some(expected) = expected
                    && expected != status =>
            {
                return Err(ReplayError::Moved {
                    id,
                    status,
                    expected,
                });
            }
            Some(ReceiptStatus::Pending) => {
                if !make_due(&mut transaction, id, replayed_by, reason).await? {
                    return Err(ReplayError::Leased(id));
                }
            }
            Some(status) if !ReceiptStatus::NEEDS_A_PERSON.contains(&status) => {
                return Err(ReplayError::WrongState { id, status });
            }
            Some(status) => {
                if requeue(&mut transaction, id, replayed_by, reason).await? != Some(status) {
                    return Err(ReplayError::WrongState { id, status });
                }
                release_subject_hold(&mut transaction, id).await?;
            }
        }
    }
    transaction.commit().await?;
    Ok(())
}

/// The receipt's status, its row locked until the decision commits (a worker finishing
/// it waits, and the decision sees what it changes).
async fn locked_status(
    conn: &mut PgConnection,
    id: ReceiptId,
) -> Result<Option<ReceiptStatus>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT decision_lock_receipt($1) AS "status: ReceiptStatus""#,
        id as ReceiptId,
    )
    .fetch_one(conn)
    .await
}

/// A pending receipt waiting out a retry delay (after a fix, say): due now, attempts kept,
/// recorded. `false` when a worker holds its lease (it is being processed now).
async fn make_due(
    conn: &mut PgConnection,
    id: ReceiptId,
    replayed_by: &str,
    reason: &str,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT decision_make_receipt_due($1, $2, $3) AS "made_due!""#,
        id as ReceiptId,
        replayed_by,
        reason,
    )
    .fetch_one(conn)
    .await
}

/// A failed or quarantined receipt queued again, claimable now with its attempts reset,
/// recorded: the status it left (`None`: it was in neither, which the caller's lock has
/// ruled out).
async fn requeue(
    conn: &mut PgConnection,
    id: ReceiptId,
    replayed_by: &str,
    reason: &str,
) -> Result<Option<ReceiptStatus>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT decision_requeue_receipt($1, $2, $3) AS "left: ReceiptStatus""#,
        id as ReceiptId,
        replayed_by,
        reason,
    )
    .fetch_one(conn)
    .await
}

/// What an operator decides about a pending receipt that must not be processed (as it
/// stands) or retried any longer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingResolution {
    /// `quarantined`, with the operator's reason as `outcome_reason`: a person must look.
    Quarantine,
    /// `failed`, with the operator's reason as `last_error`.
    Fail,
}

impl PendingResolution {
    /// Every resolution of a pending receipt.
    pub const ALL: &'static [Self] = &[Self::Quarantine, Self::Fail];

    /// The action recorded (`receipt_resolutions.action`).
    pub fn action(self) -> ReceiptAction {
        match self {
            Self::Quarantine => ReceiptAction::Quarantine,
            Self::Fail => ReceiptAction::Fail,
        }
    }
}

/// Why a resolution was refused. Nothing is resolved when any id is refused.
#[derive(Debug, thiserror::Error)]
pub enum ReceiptResolveError {
    /// No receipt has this id.
    #[error("receipt {0} does not exist")]
    Unknown(ReceiptId),
    /// Only pending receipts can be quarantined or failed by hand.
    #[error("receipt {id} is {status}; only pending receipts can be quarantined or failed by hand")]
    WrongState {
        /// The receipt.
        id: ReceiptId,
        /// Its status.
        status: ReceiptStatus,
    },
    /// Only failed or quarantined receipts can be closed.
    #[error("receipt {id} is {status}; only failed or quarantined receipts can be closed")]
    NotClosable {
        /// The receipt.
        id: ReceiptId,
        /// Its status.
        status: ReceiptStatus,
    },
    /// Chosen by a filter on one status, it is in another now.
    #[error(
        "receipt {id} is {status} now, no longer {expected}: list again (--dry-run) and decide on what is there"
    )]
    Moved {
        /// The receipt.
        id: ReceiptId,
        /// Its status now.
        status: ReceiptStatus,
        /// The status the filter selected it in.
        expected: ReceiptStatus,
    },
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// Takes pending receipts out of the queue as quarantined or failed, recording who and
/// why, in one transaction: either every id is resolved or none. A receipt a worker is
/// applying right now is waited for: if the worker commits, the receipt is no longer
/// pending (refused); if not, the worker's fenced bookkeeping finds its lease gone.
pub async fn resolve_pending(
    conn: &mut PgConnection,
    receipt_ids: &[ReceiptId],
    resolution: PendingResolution,
    resolved_by: &str,
    reason: &str,
) -> Result<(), ReceiptResolveError> {
    let mut transaction = conn.begin().await?;
    for id in crate::in_lock_order(receipt_ids) {
        // The queue row first, as the worker's transaction locks it (then the receipt).
        let taken = sqlx::query_scalar!(
            r#"SELECT decision_take_receipt_out($1, $2, $3, $4) AS "taken!""#,
            id as ReceiptId,
            resolution.action() as ReceiptAction,
            resolved_by,
            reason,
        )
        .fetch_one(&mut *transaction)
        .await?;
        if !taken {
            return Err(match locked_status(&mut transaction, id).await? {
                None => ReceiptResolveError::Unknown(id),
                Some(status) => ReceiptResolveError::WrongState { id, status },
            });
        }
    }
    transaction.commit().await?;
    Ok(())
}

/// Closes failed or quarantined receipts an operator decided will not be processed: each
/// ends `done` with outcome `ignored` and the reason (its key stays, so a redelivery is a
/// duplicate; retention purges it like any done receipt), and the decision is recorded.
/// One transaction: every id is closed, or none. With `expected`, each must still be in
/// that status (a close chosen by a filter).
pub async fn close(
    conn: &mut PgConnection,
    receipt_ids: &[ReceiptId],
    expected: Option<ReceiptStatus>,
    closed_by: &str,
    reason: &str,
) -> Result<(), ReceiptResolveError> {
    let mut transaction = conn.begin().await?;
    for id in crate::in_lock_order(receipt_ids) {
        match locked_status(&mut transaction, id).await? {
            None => return Err(ReceiptResolveError::Unknown(id)),
            // Chosen by a filter on one status, and moved on since: not what was shown.
            Some(status)
                if let Some(expected) = expected
                    && expected != status =>
            {
                return Err(ReceiptResolveError::Moved {
                    id,
                    status,
                    expected,
                });
            }
            Some(status) if !ReceiptStatus::NEEDS_A_PERSON.contains(&status) => {
                return Err(ReceiptResolveError::NotClosable { id, status });
            }
            Some(status) => {
                let left = sqlx::query_scalar!(
                    r#"SELECT decision_close_receipt($1, $2, $3) AS "left: ReceiptStatus""#,
                    id as ReceiptId,
                    closed_by,
                    reason,
                )
                .fetch_one(&mut *transaction)
                .await?;
                if left != Some(status) {
                    return Err(ReceiptResolveError::NotClosable { id, status });
                }
                release_subject_hold(&mut transaction, id).await?;
            }
        }
    }
    transaction.commit().await?;
    Ok(())
}

/// After a replay or close of `id`, in the decision's transaction: an ordered subject no
/// failed or quarantined receipt holds any more runs again (`release_subject_hold`,
/// migrations/0001_inbound.sql: the hold's row locked, then the holders read afresh).
async fn release_subject_hold(conn: &mut PgConnection, id: ReceiptId) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT release_subject_hold($1)", id as ReceiptId)
        .fetch_one(conn)
        .await?;
    Ok(())
}
