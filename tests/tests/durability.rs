//! A 2xx promises a commit that survives a crash: no server, database or role default can
//! switch that off underneath inbound's sessions (issue 16, item 2).

use std::time::Duration;

use inbound_core::store::{self, PoolSettings, Pooler, Schema, SessionTarget};
use inbound_tests::TestDatabase;

/// A receipt of `stripe-acme` with an empty payload.
fn receipt<'a>(
    scope: &'a inbound_core::keys::SourceScope,
    event_id: &'a inbound_core::keys::EventId,
) -> store::NewReceipt<'a> {
    store::NewReceipt {
        integration: "stripe-acme",
        source_scope: scope,
        event_id,
        event_type: "payment_intent.succeeded",
        route_key: "payment_intent.succeeded",
        payload_json: "{}",
        content_digest: None,
    }
}

async fn session_setting(pool: &sqlx::PgPool) -> String {
    sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
        .fetch_one(pool)
        .await
        .expect("setting")
}

#[tokio::test]
async fn sessions_commit_durably_whatever_the_database_default_says() {
    let database = TestDatabase::create().await;
    let settings = PoolSettings {
        max_connections: 2,
        acquire_timeout: Duration::from_secs(5),
        statement_timeout: Duration::from_secs(5),
        application_name: "durability-test".to_owned(),
        target: SessionTarget {
            schema: Schema::default(),
            pooler: Pooler::None,
        },
    };
    for (default, in_force) in [
        ("off", "on"),
        ("local", "on"),
        ("remote_write", "remote_write"),
        ("remote_apply", "remote_apply"),
    ] {
        let name = database.url().rsplit('/').next().expect("name").to_owned();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "ALTER DATABASE {name} SET synchronous_commit = {default}"
        )))
        .execute(database.pool())
        .await
        .expect("database default");
        // As the ingress and the worker build theirs, and the recorder's own connection.
        let pool = store::connect_pool_lazy(database.url(), &settings).expect("pool");
        assert_eq!(session_setting(&pool).await, in_force, "default {default}");
        let recorder = store::dedicated_connection(&pool, &settings.target, Duration::from_secs(5));
        assert_eq!(
            session_setting(&recorder).await,
            in_force,
            "recorder, default {default}"
        );
        pool.close().await;
        recorder.close().await;
    }
}

/// Behind a transaction pooler the session is not ours: a server connection may carry
/// `synchronous_commit = off` from before the role was fixed. The receipt insert itself
/// raises the setting for its own transaction, so the commit behind a 2xx is durable
/// whatever the session says.
#[tokio::test]
async fn the_receipt_insert_raises_a_weak_session_setting_for_its_own_commit() {
    use inbound_core::keys::{EventId, SourceScope};
    use sqlx::Connection;
    let database = TestDatabase::create().await;
    let scope = SourceScope::from_parts(["stripe-acme", "acct_1", "test"]);
    for (weak, event) in [("off", "evt_weak_off"), ("local", "evt_weak_local")] {
        let mut connection = database.pool().acquire().await.expect("connection");
        let mut transaction = connection.begin().await.expect("begin");
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SET LOCAL synchronous_commit = {weak}"
        )))
        .execute(&mut *transaction)
        .await
        .expect("weaken");
        let event_id = EventId::new(event);
        store::insert_receipt(&mut transaction, receipt(&scope, &event_id))
            .await
            .expect("insert");
        let in_force: String = sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
            .fetch_one(&mut *transaction)
            .await
            .expect("setting");
        transaction.commit().await.expect("commit");
        assert_eq!(in_force, "on", "a session at {weak}");
    }
}

/// The same for the worker: the statement that marks receipts finished inside the
/// business transaction raises the setting for that transaction, so a `done` (and the
/// effect intents a dispatcher may already read) is never committed less durably.
#[tokio::test]
async fn finishing_receipts_raises_a_weak_session_setting_for_the_business_commit() {
    use inbound_core::keys::{EventId, SourceScope};
    use inbound_core::store::queue::{self, Finish, FinishedReceipt};
    use sqlx::Connection;
    let database = TestDatabase::create().await;
    let mut connection = database.pool().acquire().await.expect("connection");
    let scope = SourceScope::from_parts(["stripe-acme", "acct_1", "test"]);
    let event_id = EventId::new("evt_to_finish");
    let store::InsertOutcome::Accepted(receipt) =
        store::insert_receipt(&mut connection, receipt(&scope, &event_id))
            .await
            .expect("insert")
    else {
        panic!("a new receipt");
    };
    let receipt_id = receipt.0;
    for batch in [false, true] {
        let mut transaction = connection.begin().await.expect("begin");
        sqlx::query("SET LOCAL synchronous_commit = off")
            .execute(&mut *transaction)
            .await
            .expect("weaken");
        if batch {
            queue::finish_all(
                &mut transaction,
                &[FinishedReceipt {
                    receipt_id: inbound_core::keys::ReceiptId(receipt_id),
                    attempts: 1,
                    finish: Finish::Applied,
                }],
            )
            .await
            .expect("finish all");
        } else {
            queue::finish(
                &mut transaction,
                inbound_core::keys::ReceiptId(receipt_id),
                1,
                Finish::Applied,
            )
            .await
            .expect("finish");
        }
        let in_force: String = sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
            .fetch_one(&mut *transaction)
            .await
            .expect("setting");
        transaction.rollback().await.expect("rollback");
        assert_eq!(in_force, "on", "batch: {batch}");
    }
}
