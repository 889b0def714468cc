//! A 2xx promises a commit that survives a crash: no server, database or role default can
//! switch that off underneath inbound's sessions (issue 16, item 2).

use std::time::Duration;

use inbound_store::{self as store, PoolSettings, Pooler, Schema, SessionTarget};
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
        delivery_json: None,
        order: Default::default(),
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

/// What `synchronous_commit` is in force when a transaction that writes `receipts`
/// commits: a deferred constraint trigger fires at the commit itself (for an autocommitted
/// statement, its implicit commit) and writes it down, per statement.
async fn record_the_commits_durability(pool: &sqlx::PgPool) {
    sqlx::raw_sql(
        "CREATE TABLE inbound.commit_durability (setting text NOT NULL);
         CREATE FUNCTION inbound.note_commit_durability() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             INSERT INTO inbound.commit_durability VALUES (current_setting('synchronous_commit'));
             RETURN NULL;
         END $$;
         CREATE CONSTRAINT TRIGGER note_commit_durability AFTER INSERT OR UPDATE ON inbound.receipts
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION inbound.note_commit_durability();",
    )
    .execute(pool)
    .await
    .expect("the durability recorder");
}

async fn commit_durability(pool: &sqlx::PgPool) -> Vec<String> {
    sqlx::query_scalar("DELETE FROM inbound.commit_durability RETURNING setting")
        .fetch_all(pool)
        .await
        .expect("recorded settings")
}

/// Behind a transaction pooler the session is not ours: a server connection may carry
/// `synchronous_commit = off` (or `local`) from before the role was fixed. The ingress's
/// group commit is one autocommitted statement, and that statement itself raises the
/// setting for its own implicit transaction: the commit behind a 2xx is durable whatever
/// the session says. Recorded at the commit, on the exact path the ingress runs.
#[tokio::test]
async fn the_autocommitted_receipt_insert_commits_durably_on_a_weak_session() {
    use inbound_core::keys::{EventId, SourceScope};
    let database = TestDatabase::create().await;
    record_the_commits_durability(database.pool()).await;
    let scope = SourceScope::from_parts(["stripe-acme", "acct_1", "test"]);
    for (weak, event) in [("off", "evt_weak_off"), ("local", "evt_weak_local")] {
        let mut connection = database.pool().acquire().await.expect("connection");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "SET synchronous_commit = {weak}"
        )))
        .execute(&mut *connection)
        .await
        .expect("weaken the session");
        let event_id = EventId::new(event);
        let inserted = store::insert_receipts(&mut connection, &[receipt(&scope, &event_id)])
            .await
            .expect("insert");
        assert!(matches!(inserted[..], [store::InsertOutcome::Accepted(_)]));
        let session: String = sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
            .fetch_one(&mut *connection)
            .await
            .expect("setting");
        assert_eq!(session, weak, "the session itself is left as it was");
        assert_eq!(
            commit_durability(database.pool()).await,
            ["on"],
            "a session at {weak}"
        );
    }
}

/// The same for the worker: the statement that marks receipts finished inside the
/// business transaction raises the setting for that transaction, so a `done` (and the
/// effect intents a dispatcher may already read) is never committed less durably — on a
/// session left at `off`, recorded at the commit.
#[tokio::test]
async fn finishing_receipts_commits_durably_on_a_weak_session() {
    use inbound_core::keys::{EventId, SourceScope};
    use inbound_store::queue::{self, Finish, FinishedReceipt};
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
    record_the_commits_durability(database.pool()).await;
    sqlx::raw_sql("SET synchronous_commit = off")
        .execute(&mut *connection)
        .await
        .expect("weaken the session");
    for batch in [false, true] {
        let mut transaction = connection.begin().await.expect("begin");
        let finished = FinishedReceipt {
            receipt_id: receipt,
            attempts: 1,
            finish: Finish::Applied,
        };
        if batch {
            queue::finish_all(&mut transaction, &[finished])
                .await
                .expect("finish all");
        } else {
            queue::finish(&mut transaction, receipt, 1, Finish::Applied)
                .await
                .expect("finish");
        }
        transaction.commit().await.expect("commit");
        assert_eq!(
            commit_durability(database.pool()).await,
            ["on"],
            "batch: {batch}"
        );
    }
}
