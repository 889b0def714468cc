//! A 2xx promises a commit that survives a crash: no server, database or role default can
//! switch that off underneath inbound's sessions (issue 16, item 2).

use std::time::Duration;

use inbound_core::store::{self, PoolSettings, Pooler, Schema, SessionTarget};
use inbound_tests::TestDatabase;

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
