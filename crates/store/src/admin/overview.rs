//! The console's overview as one read model: every integration's queue, what needs a
//! person, its ages and its recent deliveries, and every sink's open effects, failures,
//! oldest open effect and longest due wait — a fixed number of statements whatever the
//! number of integrations and sinks (the ages of all of them in one statement each, an
//! index descent per id), never a query per row.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use inbound_core::states::{EffectStatus, ReceiptStatus};

use super::{IntegrationQueue, RecentReceipts};

/// One integration's line of the overview.
#[derive(Debug, Clone, PartialEq)]
pub struct IntegrationOverview {
    /// The integration id.
    pub integration: String,
    /// Its queue now (zeros when nothing is queued).
    pub pending: i64,
    /// Held by a worker under a live lease.
    pub leased: i64,
    /// Backing off after a transient failure.
    pub waiting: i64,
    /// Failed receipts.
    pub failed: i64,
    /// Quarantined receipts.
    pub quarantined: i64,
    /// Seconds the oldest claimable receipt has waited (0 when none).
    pub claimable_age_seconds: f64,
    /// Seconds the oldest receipt waiting out a retry delay has waited (0 when none).
    pub waiting_age_seconds: f64,
    /// Its newest receipt among the newest ids looked back on, with how many of those it
    /// has and how many its handlers ignored (`None`: none among them).
    pub recent: Option<(DateTime<Utc>, i64, i64)>,
}

/// One sink's line of the overview.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkOverview {
    /// The sink id.
    pub sink: String,
    /// Its open effects by status.
    pub open: Vec<(EffectStatus, i64)>,
    /// Its failed effects.
    pub failed: i64,
    /// Seconds its oldest open effect has been open (0 when none).
    pub oldest_open_seconds: f64,
    /// Seconds its longest-waiting due effect has waited for a slot (0 when none).
    pub due_wait_seconds: f64,
}

/// The overview: every integration and sink that is configured or holds something, by id.
#[derive(Debug, Clone, PartialEq)]
pub struct Overview {
    /// One line per integration, by id.
    pub integrations: Vec<IntegrationOverview>,
    /// One line per sink, by id.
    pub sinks: Vec<SinkOverview>,
    /// Effects not closed, by status.
    pub unclosed_effects: Vec<(EffectStatus, i64)>,
}

/// The overview of the integrations and sinks in `known` (the configuration's) and any
/// other that holds something, the recent deliveries read from the newest `look_back`
/// receipt ids.
pub async fn overview(
    conn: &mut PgConnection,
    known_integrations: &[String],
    known_sinks: &[String],
    look_back: i64,
) -> Result<Overview, sqlx::Error> {
    let queues = super::queue_by_integration(&mut *conn).await?;
    let review = super::review_counts(&mut *conn).await?;
    let recent = super::recent_receipts(&mut *conn, look_back).await?;
    let open = crate::effects::open_counts_by_sink(&mut *conn).await?;
    let failed = crate::effects::failed_counts_by_sink(&mut *conn).await?;
    let unclosed = crate::effects::counts(&mut *conn, UNCLOSED).await?;
    let mut integrations: Vec<String> = known_integrations.to_vec();
    integrations.extend(queues.iter().map(|queue| queue.integration.clone()));
    integrations.extend(review.iter().map(|(integration, _, _)| integration.clone()));
    integrations.extend(recent.iter().map(|recent| recent.integration.clone()));
    integrations.sort();
    integrations.dedup();
    let mut sinks: Vec<String> = known_sinks.to_vec();
    sinks.extend(open.iter().map(|(sink, _, _)| sink.clone()));
    sinks.extend(failed.iter().map(|(sink, _)| sink.clone()));
    sinks.sort();
    sinks.dedup();
    let ages = integration_ages(&mut *conn, &integrations).await?;
    let sink_ages = sink_ages(&mut *conn, &sinks).await?;
    Ok(Overview {
        integrations: integrations
            .into_iter()
            .zip(ages)
            .map(|(integration, (claimable, waiting))| {
                integration_line(integration, claimable, waiting, &queues, &review, &recent)
            })
            .collect(),
        sinks: sinks
            .into_iter()
            .zip(sink_ages)
            .map(
                |(sink, (oldest_open_seconds, due_wait_seconds))| SinkOverview {
                    open: EffectStatus::OPEN
                        .iter()
                        .map(|&status| {
                            let count = open
                                .iter()
                                .find(|(candidate, state, _)| {
                                    *candidate == sink && *state == status
                                })
                                .map_or(0, |(_, _, count)| *count);
                            (status, count)
                        })
                        .collect(),
                    failed: failed
                        .iter()
                        .find(|(candidate, _)| *candidate == sink)
                        .map_or(0, |(_, count)| *count),
                    oldest_open_seconds,
                    due_wait_seconds,
                    sink,
                },
            )
            .collect(),
        unclosed_effects: unclosed,
    })
}

/// Effects not closed: open and failed (the closed ones grow with retention, and counting
/// them reads every effect).
const UNCLOSED: &[EffectStatus] = &[
    EffectStatus::Pending,
    EffectStatus::InFlight,
    EffectStatus::Uncertain,
    EffectStatus::Review,
    EffectStatus::Failed,
];

fn integration_line(
    integration: String,
    claimable_age_seconds: f64,
    waiting_age_seconds: f64,
    queues: &[IntegrationQueue],
    review: &[(String, ReceiptStatus, i64)],
    recent: &[RecentReceipts],
) -> IntegrationOverview {
    let queue = queues.iter().find(|queue| queue.integration == integration);
    let needing = |status| {
        review
            .iter()
            .find(|(candidate, state, _)| *candidate == integration && *state == status)
            .map_or(0, |(_, _, count)| *count)
    };
    IntegrationOverview {
        pending: queue.map_or(0, |queue| queue.pending),
        leased: queue.map_or(0, |queue| queue.leased),
        waiting: queue.map_or(0, |queue| queue.waiting),
        failed: needing(ReceiptStatus::Failed),
        quarantined: needing(ReceiptStatus::Quarantined),
        claimable_age_seconds,
        waiting_age_seconds,
        recent: recent
            .iter()
            .find(|recent| recent.integration == integration)
            .map(|recent| (recent.newest_at, recent.count, recent.ignored)),
        integration,
    }
}

/// The claimable and waiting ages of each of `integrations`, in order: one statement, the
/// first row of an index order per integration (as `queue_ages` reads one).
async fn integration_ages(
    conn: &mut PgConnection,
    integrations: &[String],
) -> Result<Vec<(f64, f64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT
             COALESCE(EXTRACT(EPOCH FROM now() - LEAST(
                 (SELECT q.visible_at FROM receipt_queue q
                  WHERE q.integration = i.integration AND q.subject IS NULL
                    AND q.visible_at <= now()
                  ORDER BY q.visible_at LIMIT 1),
                 -- The ordered ones as queue_ages reads them (admin/counts.rs).
                 (SELECT o.visible_at FROM (
                      SELECT q.subject, q.visible_at, q.enqueued_at FROM receipt_queue q
                      WHERE q.integration = i.integration
                        AND EXISTS (SELECT 1 FROM receipt_queue s
                                    WHERE s.integration = i.integration
                                      AND s.subject IS NOT NULL)
                      ORDER BY q.enqueued_at LIMIT 10000) o
                  WHERE o.subject IS NOT NULL AND o.visible_at <= now()
                    AND NOT EXISTS (SELECT 1 FROM subject_leases l
                                    WHERE l.integration = i.integration AND l.subject = o.subject
                                      AND l.leased_until = 'infinity')
                  ORDER BY o.enqueued_at LIMIT 1))), 0)::float8 AS "pending!",
             COALESCE(EXTRACT(EPOCH FROM now() - (
                 SELECT q.enqueued_at FROM receipt_queue q
                 WHERE q.integration = i.integration AND q.visible_at > now()
                   AND q.leased_by IS NULL
                 ORDER BY q.enqueued_at LIMIT 1)), 0)::float8 AS "waiting!"
         FROM unnest($1::text[]) WITH ORDINALITY AS i (integration, position)
         ORDER BY i.position"#,
        integrations,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.pending, row.waiting))
        .collect())
}

/// The oldest open age and the longest due wait of each of `sinks`, in order: one
/// statement, through `effects_open_by_sink` and `effects_due_by_sink` per sink.
async fn sink_ages(
    conn: &mut PgConnection,
    sinks: &[String],
) -> Result<Vec<(f64, f64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT
             COALESCE(EXTRACT(EPOCH FROM now() - (
                 SELECT min(e.created_at) FROM effects e
                 WHERE e.sink = s.sink AND e.status IN ('pending', 'in_flight', 'uncertain'))),
                 0)::float8 AS "oldest_open!",
             COALESCE(EXTRACT(EPOCH FROM now() - (
                 SELECT min(e.visible_at) FROM effects e
                 WHERE e.sink = s.sink AND e.status IN ('pending', 'in_flight')
                   AND e.visible_at <= now())), 0)::float8 AS "due_wait!"
         FROM unnest($1::text[]) WITH ORDINALITY AS s (sink, position)
         ORDER BY s.position"#,
        sinks,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.oldest_open, row.due_wait))
        .collect())
}
