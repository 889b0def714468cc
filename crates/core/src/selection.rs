//! What operators name, read the same way by `inboundctl` and the console: a moment (an
//! RFC 3339 time or an age before now), and the integrations or sinks an id and an owner
//! select from the configuration, with their owners.

use chrono::{DateTime, Utc};

use crate::config::Config;

/// A moment: RFC 3339 (`2026-12-01T08:00:00Z`) or an age before now (`90s`, `30m`, `2h`,
/// `7d`).
pub fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    let split = text.char_indices().last().map_or(0, |(index, _)| index);
    let (number, unit) = text.split_at(split);
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => 0,
    };
    match number.parse::<i64>() {
        Ok(count) if seconds > 0 && count >= 0 && count <= 36_500 * 86_400 / seconds => {
            Ok(Utc::now() - chrono::Duration::seconds(count * seconds))
        }
        _ => Err(format!(
            "{text:?} is neither an RFC 3339 time (2026-12-01T08:00:00Z) nor an age (90s, 30m, 2h, 7d)"
        )),
    }
}

/// The integrations an `--integration` / `--owner` pair selects (`None`: any).
pub fn integrations_selected(
    integration: Option<&str>,
    owner: Option<&str>,
    config: Option<&Config>,
) -> Result<Option<Vec<String>>, String> {
    let Some(owner) = owner else {
        return Ok(integration.map(|id| vec![id.to_owned()]));
    };
    let Some(config) = config else {
        return Err(
            "--owner needs the configuration that names the owners: --config FILE (or INBOUND_CONFIG)"
                .to_owned(),
        );
    };
    let owned: Vec<String> = config
        .integrations()
        .iter()
        .filter(|candidate| candidate.owner.as_deref() == Some(owner))
        .filter(|candidate| integration.is_none_or(|id| id == candidate.id))
        .map(|candidate| candidate.id.clone())
        .collect();
    if owned.is_empty() {
        return Err(format!(
            "no integration{} is owned by {owner:?} in the configuration",
            integration.map(|id| format!(" {id}")).unwrap_or_default()
        ));
    }
    Ok(Some(owned))
}

/// The sinks a `--sink` / `--owner` pair selects (`None`: any).
pub fn sinks_selected(
    sink: Option<&str>,
    owner: Option<&str>,
    config: Option<&Config>,
) -> Result<Option<Vec<String>>, String> {
    let Some(owner) = owner else {
        return Ok(sink.map(|id| vec![id.to_owned()]));
    };
    let Some(config) = config else {
        return Err(
            "--owner needs the configuration that names the owners: --config FILE (or INBOUND_CONFIG)"
                .to_owned(),
        );
    };
    let owned: Vec<String> = config
        .sinks()
        .iter()
        .filter(|candidate| candidate.owner.as_deref() == Some(owner))
        .filter(|candidate| sink.is_none_or(|id| id == candidate.id))
        .map(|candidate| candidate.id.clone())
        .collect();
    if owned.is_empty() {
        return Err(format!(
            "no sink{} is owned by {owner:?} in the configuration",
            sink.map(|id| format!(" {id}")).unwrap_or_default()
        ));
    }
    Ok(Some(owned))
}

/// The owner of an integration, as the configuration names it ("-" when none or unknown).
pub fn integration_owner(config: Option<&Config>, integration: &str) -> String {
    config
        .and_then(|config| config.integration(integration))
        .and_then(|integration| integration.owner.clone())
        .unwrap_or_else(|| "-".to_owned())
}

/// The owner of a sink ("-" when none or unknown).
pub fn sink_owner(config: Option<&Config>, sink: &str) -> String {
    config
        .and_then(|config| config.sinks().iter().find(|candidate| candidate.id == sink))
        .and_then(|sink| sink.owner.clone())
        .unwrap_or_else(|| "-".to_owned())
}
