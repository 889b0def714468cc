//! `inboundctl check-config`'s notes on subjects: the routes whose receipts will name no
//! business object, because their provider has no default subject (Slack, Standard
//! Webhooks, `hmac`, `token`) and the route gives no `subject` pointers. Their receipts
//! have no timeline (`inboundctl subject show`) and cannot be ordered; a note, not a
//! warning, since many routes need neither.

use inbound_core::config::Config;

/// One line per route without a subject, in file order, e.g. `integration slack-example:
/// route "app_mention" names no subject (slack events have no default): give it
/// subject = ["/json/pointer", …] for a timeline`.
pub fn routes_without_a_subject(config: &Config) -> Vec<String> {
    let mut notes = Vec::new();
    for integration in config.integrations() {
        if integration.provider.default_subject().is_some() {
            continue;
        }
        for (key, route) in &integration.routes {
            if route.subject.is_empty() {
                notes.push(format!(
                    "integration {}: route {key:?} names no subject ({} events have no default): \
                     give it subject = [\"/json/pointer\", …] for a timeline and ordering",
                    integration.id,
                    integration.provider.name()
                ));
            }
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_routes_of_providers_without_a_default_and_without_pointers_are_named() {
        let text = r#"
[[integration]]
id = "stripe"
provider = "stripe"
tenant = "t"
secrets = ["env:S"]
[integration.routes]
"invoice.paid" = { handler = "forward" , sink = "s" }

[[integration]]
id = "slack"
provider = "slack"
tenant = "t"
secrets = ["env:S"]
[integration.routes]
"app_mention" = { handler = "forward", sink = "s" }
"message" = { handler = "forward", sink = "s", subject = ["/event/channel"], ordered = true }

[[sink]]
id = "s"
url = "http://127.0.0.1:1/"
"#;
        let config =
            Config::from_toml(text, &|_| Some("whsec_dGVzdA==".to_owned())).expect("valid");
        let notes = routes_without_a_subject(&config);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].starts_with("integration slack: route \"app_mention\""),
            "{notes:?}"
        );
    }
}
