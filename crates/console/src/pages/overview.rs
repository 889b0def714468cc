//! The overview: per integration the queue by state, its ages, the newest delivery and
//! how many recent receipts were ignored; per sink what is open and how long the due wait
//! is; and the effects not yet closed. One read model of the store's (`admin::overview`).

use super::*;

#[derive(Debug)]
pub struct IntegrationRow {
    pub id: String,
    pub owner: String,
    pub pending: i64,
    pub leased: i64,
    pub waiting: i64,
    pub failed: i64,
    pub quarantined: i64,
    pub claimable_age: String,
    pub waiting_age: String,
    pub newest: String,
    /// Ignored by the worker among its receipts in the look-back.
    pub ignored: String,
}

#[derive(Debug)]
pub struct SinkRow {
    pub id: String,
    pub owner: String,
    pub counts: Vec<(String, i64)>,
    pub failed: i64,
    pub oldest_open: String,
    pub due_wait: String,
}

#[derive(Template)]
#[template(path = "console/overview.html")]
pub struct Overview {
    pub frame: Frame,
    pub integrations: Vec<IntegrationRow>,
    pub sinks: Vec<SinkRow>,
    pub open_statuses: Vec<&'static str>,
    pub effect_totals: Vec<(String, i64)>,
}

pub(super) async fn overview(console: &Console, context: &Context) -> Page {
    let config = console.config();
    let integrations: Vec<String> = config
        .map(|config| config.integrations().iter().map(|i| i.id.clone()).collect())
        .unwrap_or_default();
    let sinks: Vec<String> = config
        .map(|config| config.sinks().iter().map(|s| s.id.clone()).collect())
        .unwrap_or_default();
    let model = console
        .db(async |connection| {
            admin::overview(connection, &integrations, &sinks, NEWEST_LOOK_BACK).await
        })
        .await?;
    let integration_rows = model
        .integrations
        .into_iter()
        .map(|line| IntegrationRow {
            owner: integration_owner(config, &line.integration),
            pending: line.pending,
            leased: line.leased,
            waiting: line.waiting,
            failed: line.failed,
            quarantined: line.quarantined,
            claimable_age: view::age(line.claimable_age_seconds),
            waiting_age: view::age(line.waiting_age_seconds),
            newest: line.recent.map_or_else(
                || format!("none in the newest {NEWEST_LOOK_BACK} receipts"),
                |(newest_at, _, _)| view::time(newest_at),
            ),
            ignored: line.recent.map_or_else(
                || "-".to_owned(),
                |(_, count, ignored)| format!("{ignored} of {count}"),
            ),
            id: line.integration,
        })
        .collect();
    let sink_rows = model
        .sinks
        .into_iter()
        .map(|line| SinkRow {
            owner: sink_owner(config, &line.sink),
            counts: line
                .open
                .into_iter()
                .map(|(status, count)| (status.as_str().to_owned(), count))
                .collect(),
            failed: line.failed,
            oldest_open: view::age(line.oldest_open_seconds),
            due_wait: view::age(line.due_wait_seconds),
            id: line.sink,
        })
        .collect();
    Ok(respond::page(
        StatusCode::OK,
        &Overview {
            frame: context.frame("Overview"),
            integrations: integration_rows,
            sinks: sink_rows,
            open_statuses: EffectStatus::OPEN
                .iter()
                .map(|status| status.as_str())
                .collect(),
            effect_totals: model
                .unclosed_effects
                .into_iter()
                .map(|(status, count)| (status.as_str().to_owned(), count))
                .collect(),
        },
    ))
}
