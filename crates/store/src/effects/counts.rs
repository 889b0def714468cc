//! The effect gauges and `inboundctl status`: open effects by sink and status, the
//! oldest undelivered and longest-waiting due effect of a sink, and open effects whose
//! sink no worker's configuration names. Each reads an index of open effects only.

use sqlx::PgConnection;

use inbound_core::states::EffectStatus;

/// Effects in each of `statuses`, in that order (0 when none), for `inboundctl status`
/// ([`EffectStatus::ALL`]).
pub async fn counts(
    conn: &mut PgConnection,
    statuses: &[EffectStatus],
) -> Result<Vec<(EffectStatus, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT s.status AS "status!: EffectStatus", COALESCE(c.n, 0) AS "count!"
         FROM unnest($1::text[]) WITH ORDINALITY AS s (status, position)
         LEFT JOIN (SELECT status, count(*) AS n FROM effects
                    WHERE status = ANY ($1) GROUP BY status) c ON c.status = s.status
         ORDER BY s.position"#,
        statuses as &[EffectStatus],
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.status, row.count))
        .collect())
}

/// Open effects ([`EffectStatus::OPEN`]) per sink and status, through the status index
/// (the finished ones, which grow with retention, are never read).
pub async fn open_counts_by_sink(
    conn: &mut PgConnection,
) -> Result<Vec<(String, EffectStatus, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT sink, status AS "status: EffectStatus", count(*) AS "count!" FROM effects
         WHERE status = ANY ($1) GROUP BY sink, status"#,
        EffectStatus::OPEN as &[EffectStatus],
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.sink, row.status, row.count))
        .collect())
}

/// Failed effects per sink — refused by their sink, waiting for a person to retry or
/// abandon them — through the status index (at most the ones not yet closed).
pub async fn failed_counts_by_sink(
    conn: &mut PgConnection,
) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT sink, count(*) AS "count!" FROM effects WHERE status = 'failed' GROUP BY sink"#,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|row| (row.sink, row.count)).collect())
}

/// Whether an operator retried one of `sink`'s effects (`inboundctl effects resolve
/// --retry`) after `since`: a paused sink's breaker then probes at once. Asked only for a
/// sink whose breaker is open, once a gauge refresh; it reads the audit trail of
/// operators' decisions, which grows with people's decisions, not with traffic.
pub async fn retried_by_an_operator_since(
    conn: &mut PgConnection,
    sink: &str,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (
             SELECT 1 FROM effect_resolutions r JOIN effects e ON e.id = r.effect_id
             WHERE e.sink = $1 AND r.action = 'retry' AND r.resolved_at > $2
         ) AS "retried!""#,
        sink,
        since,
    )
    .fetch_one(conn)
    .await
}

/// Seconds since the oldest undelivered (pending, in flight or uncertain) effect of `sink`
/// was recorded (0 when none).
pub async fn oldest_open_age_seconds(
    conn: &mut PgConnection,
    sink: &str,
) -> Result<f64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS "age!"
         FROM effects WHERE sink = $1 AND status IN ('pending', 'in_flight', 'uncertain')"#,
        sink,
    )
    .fetch_one(conn)
    .await
}

/// Seconds the longest-waiting *due* effect of `sink` (pending or in flight, its time come)
/// has waited for a dispatcher slot (0 when none): what more dispatchers would shorten,
/// unlike the age of effects waiting out a retry delay or being reconciled. Read through
/// `effects_due_by_sink`.
pub async fn oldest_due_wait_seconds(
    conn: &mut PgConnection,
    sink: &str,
) -> Result<f64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(visible_at)), 0)::float8 AS "wait!"
         FROM effects
         WHERE sink = $1 AND status IN ('pending', 'in_flight') AND visible_at <= now()"#,
        sink,
    )
    .fetch_one(conn)
    .await
}

/// Undelivered effects per sink not among `known`, at most 20 sinks (a worker counts what
/// it leaves for workers configured for those sinks).
pub async fn open_for_unknown_sinks(
    conn: &mut PgConnection,
    known: &[&str],
) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT sink, count(*) AS "count!" FROM effects
         WHERE status IN ('pending', 'in_flight', 'uncertain') AND sink <> ALL($1::text[])
         GROUP BY sink ORDER BY sink LIMIT 20"#,
        known as &[&str],
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|row| (row.sink, row.count)).collect())
}
