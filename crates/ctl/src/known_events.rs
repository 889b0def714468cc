//! The event types each provider is known to send, kept in the code so that
//! `inboundctl check-config` can warn about route keys no delivery will ever carry.
//!
//! A misspelled route key is otherwise silent: `payment_intent.succeded` is a valid key,
//! no event ever has that type, and every `payment_intent.succeeded` delivery is answered
//! `200 ignored`. [`route_key_warnings`] names such keys, with the closest known type as a
//! "did you mean" hint ([`suggestion`]).
//!
//! This is a warning aid, not a filter. The ingress never refuses an event type because it
//! is missing here, and routing never consults these lists. Providers add types over time
//! (and preview programmes send types that are not listed), so a stale list costs a
//! spurious warning, never an event; add the type here when that happens.
//!
//! The lists are data, one file per provider beside its home in `inbound-core`
//! (`crates/core/src/provider/known_events/<provider>.txt`, read through
//! [`Provider::known_event_types`]); each provider's file says where its list comes from.
//! A pattern key `prefix.*` is known when at least one listed type starts with `prefix.`;
//! the catch-all `*` always is.

use inbound_core::config::{CATCH_ALL, Config, PATTERN_SUFFIX};
use inbound_core::verify::Provider;

/// The largest edit distance at which [`suggestion`] still offers a known type.
pub const MAX_SUGGESTION_DISTANCE: usize = 3;

/// The known event types of `provider`, sorted; `None` when every sender chooses its own
/// (Standard Webhooks, `hmac`, `token`).
pub fn known_types(provider: Provider) -> Option<&'static [&'static str]> {
    provider.known_event_types()
}

/// Whether `provider` is known to send events that `route_key` matches: an exact type, a
/// pattern `prefix.*` that at least one known type falls under, or the catch-all `*`.
/// `None` when the provider has no list (Standard Webhooks, `hmac`, `token`).
pub fn is_known(provider: Provider, route_key: &str) -> Option<bool> {
    let types = known_types(provider)?;
    if route_key == CATCH_ALL {
        return Some(true);
    }
    let known = match pattern_prefix(route_key) {
        // `prefix.` (with its dot), as routing compares it.
        Some(prefix) => {
            let dotted = &route_key[..=prefix.len()];
            has_type_starting_with(types, dotted) || is_free_form(provider, dotted, true)
        }
        None => types.binary_search(&route_key).is_ok() || is_free_form(provider, route_key, false),
    };
    Some(known)
}

/// The closest known type to `route_key`, for a "did you mean" hint: at most
/// [`MAX_SUGGESTION_DISTANCE`] edits away (and at most a third of the key's length, so
/// short keys are not matched to anything), transposed neighbours counting as one edit.
/// For a pattern `prefix.*` it is the closest prefix that known types have, without `.*`
/// (`customer` for `custmer.*`). A Slack key `message.…` (a subscription name such as
/// `message.channels`) suggests `message`, the type those subscriptions deliver.
///
/// `None` when the key is known, the provider has no list, or nothing is close enough.
pub fn suggestion(provider: Provider, route_key: &str) -> Option<&'static str> {
    if is_known(provider, route_key)? {
        return None;
    }
    let types = known_types(provider)?;
    match pattern_prefix(route_key) {
        Some(prefix) => closest(
            prefix,
            types
                .iter()
                .flat_map(|known| known.match_indices('.').map(move |(dot, _)| &known[..dot])),
        ),
        None if provider == Provider::Slack && route_key.starts_with("message.") => Some("message"),
        None => closest(route_key, types.iter().copied()),
    }
}

/// One line per route key whose provider is not known to send it, in file order, e.g.
/// `integration stripe-acme: route "payment_intent.succeded" is not an event type stripe
/// sends (did you mean "payment_intent.succeeded"?): deliveries of it would be answered
/// 200 ignored`. Empty when every key is known (or belongs to a provider without a list).
pub fn route_key_warnings(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    for integration in config.integrations() {
        let provider = integration.provider;
        for route_key in integration.routes.keys() {
            if is_known(provider, route_key) != Some(false) {
                continue;
            }
            let is_pattern = pattern_prefix(route_key).is_some();
            let what = if is_pattern {
                "matches no event type"
            } else {
                "is not an event type"
            };
            let hint = match suggestion(provider, route_key) {
                Some(prefix) if is_pattern => {
                    format!(" (did you mean {:?}?)", format!("{prefix}{PATTERN_SUFFIX}"))
                }
                Some(known) => format!(" (did you mean {known:?}?)"),
                None => String::new(),
            };
            let outcome = if integration.routes.contains_key(CATCH_ALL) {
                format!(
                    "it never matches, so deliveries meant for it go to the catch-all route {CATCH_ALL:?}"
                )
            } else {
                "deliveries of it would be answered 200 ignored".to_owned()
            };
            warnings.push(format!(
                "integration {}: route {route_key:?} {what} {} sends{hint}: {outcome}",
                integration.id,
                provider.name(),
            ));
        }
    }
    warnings
}

/// `prefix` of a pattern key `prefix.*`; `None` for an exact key or the catch-all.
fn pattern_prefix(route_key: &str) -> Option<&str> {
    route_key
        .strip_suffix(PATTERN_SUFFIX)
        .filter(|prefix| !prefix.is_empty())
}

/// Whether some type of the sorted `types` starts with `prefix`: they all sort together,
/// from the first type not below `prefix`.
fn has_type_starting_with(types: &[&str], prefix: &str) -> bool {
    let first = types.partition_point(|known| *known < prefix);
    types
        .get(first)
        .is_some_and(|known| known.starts_with(prefix))
}

/// Whether `key` is a GitHub `event.action` of an event whose actions are free-form, or
/// (`is_prefix`) a pattern prefix `event.…` of one.
fn is_free_form(provider: Provider, key: &str, is_prefix: bool) -> bool {
    provider.free_form_actions().iter().any(|event| {
        key.strip_prefix(event)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|action| is_prefix || !action.is_empty())
    })
}

/// The candidate nearest to `wanted` within the suggestion limits; the first one on a tie.
fn closest(wanted: &str, candidates: impl Iterator<Item = &'static str>) -> Option<&'static str> {
    let limit = MAX_SUGGESTION_DISTANCE.min(wanted.len() / 3);
    let mut best: Option<(usize, &'static str)> = None;
    for candidate in candidates {
        let bound = best.map_or(limit, |(distance, _)| distance.saturating_sub(1));
        if candidate.len().abs_diff(wanted.len()) > bound {
            continue;
        }
        let distance = edit_distance(wanted.as_bytes(), candidate.as_bytes());
        if distance <= bound && distance > 0 {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// The optimal-string-alignment distance: insertions, deletions, substitutions and swaps
/// of two adjacent bytes each cost one.
fn edit_distance(from: &[u8], to: &[u8]) -> usize {
    let mut before_previous: Vec<usize> = vec![0; to.len() + 1];
    let mut previous: Vec<usize> = (0..=to.len()).collect();
    let mut current: Vec<usize> = vec![0; to.len() + 1];
    for (i, &from_byte) in from.iter().enumerate() {
        current[0] = i + 1;
        for (j, &to_byte) in to.iter().enumerate() {
            let substitution = previous[j] + usize::from(from_byte != to_byte);
            let mut distance = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
            if i > 0 && j > 0 && from_byte == to[j - 1] && from[i - 1] == to_byte {
                distance = distance.min(before_previous[j - 1] + 1);
            }
            current[j + 1] = distance;
        }
        std::mem::swap(&mut before_previous, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[to.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_github_action_belongs_to_a_listed_event() {
        let github = known_types(Provider::Github).expect("GitHub's list");
        for known in github {
            if let Some((event, _action)) = known.split_once('.') {
                assert!(
                    github.binary_search(&event).is_ok(),
                    "{known:?}: event {event:?} is not listed"
                );
            }
        }
    }

    #[test]
    fn known_types_are_known() {
        let cases = [
            (Provider::Stripe, "payment_intent.succeeded"),
            (Provider::Stripe, "charge.refunded"),
            (Provider::Stripe, "charge.dispute.created"),
            (Provider::Stripe, "invoice.paid"),
            (Provider::Stripe, "customer.subscription.updated"),
            (Provider::Stripe, "checkout.session.completed"),
            (Provider::Stripe, "account.application.authorized"),
            (Provider::Stripe, "treasury.received_debit.created"),
            (Provider::Github, "push"),
            (Provider::Github, "ping"),
            (Provider::Github, "pull_request"),
            (Provider::Github, "pull_request.opened"),
            (Provider::Github, "issues.closed"),
            (Provider::Github, "installation.created"),
            (Provider::Github, "workflow_run.completed"),
            (Provider::Slack, "message"),
            (Provider::Slack, "app_mention"),
            (Provider::Slack, "reaction_added"),
            (Provider::Slack, "team_join"),
            (Provider::Slack, "app_uninstalled"),
            (Provider::Shopify, "orders/create"),
            (Provider::Shopify, "orders/paid"),
            (Provider::Shopify, "app/uninstalled"),
            (Provider::Shopify, "app/scopes_update"),
            (Provider::Shopify, "customers/data_request"),
            (Provider::Shopify, "customers/redact"),
            (Provider::Shopify, "shop/redact"),
            (Provider::Shopify, "customer.tags_added"),
            (Provider::Paddle, "transaction.completed"),
            (Provider::Paddle, "subscription.created"),
            (Provider::Paddle, "subscription.canceled"),
            (Provider::Paddle, "api_key_exposure.created"),
            (Provider::Zoom, "meeting.started"),
            (Provider::Zoom, "meeting.ended"),
            (Provider::Zoom, "recording.completed"),
            (Provider::Zoom, "phone.callee_answered"),
            (Provider::Zoom, "bot_notification"),
        ];
        for (provider, key) in cases {
            assert_eq!(is_known(provider, key), Some(true), "{provider:?} {key}");
            assert_eq!(suggestion(provider, key), None, "{provider:?} {key}");
        }
    }

    #[test]
    fn patterns_are_known_when_a_type_falls_under_them() {
        let cases = [
            (Provider::Stripe, "customer.*", true),
            (Provider::Stripe, "customer.subscription.*", true),
            (Provider::Stripe, "charge.dispute.*", true),
            (Provider::Stripe, "treasury.*", true),
            (Provider::Stripe, "custmer.*", false),
            // No type continues past a full type name.
            (Provider::Stripe, "payment_intent.succeeded.*", false),
            // `prefix.*` needs the dot: `charge` alone is not a prefix of `charges.x`.
            (Provider::Stripe, "charg.*", false),
            (Provider::Github, "pull_request.*", true),
            (Provider::Github, "issues.*", true),
            (Provider::Github, "push.*", false),
            (Provider::Github, "pull_requests.*", false),
            // Slack types have no dots: no pattern can match one.
            (Provider::Slack, "message.*", false),
            // Shopify topics split at `/`; only the `customer.…` ones have a dot.
            (Provider::Shopify, "customer.*", true),
            (Provider::Shopify, "orders.*", false),
            (Provider::Paddle, "transaction.*", true),
            (Provider::Paddle, "transactions.*", false),
            (Provider::Zoom, "meeting.*", true),
            (Provider::Zoom, "team_chat.*", true),
            // Answered by the ingress, never routed.
            (Provider::Zoom, "endpoint.*", false),
        ];
        for (provider, key, known) in cases {
            assert_eq!(is_known(provider, key), Some(known), "{provider:?} {key}");
        }
    }

    #[test]
    fn catch_all_is_always_known_where_there_is_a_list() {
        for provider in [
            Provider::Stripe,
            Provider::Github,
            Provider::Slack,
            Provider::Shopify,
            Provider::Paddle,
            Provider::Zoom,
        ] {
            assert_eq!(is_known(provider, CATCH_ALL), Some(true), "{provider:?}");
            assert_eq!(suggestion(provider, CATCH_ALL), None, "{provider:?}");
        }
    }

    #[test]
    fn standard_webhooks_has_no_list() {
        assert_eq!(known_types(Provider::Standard), None);
        assert_eq!(known_types(Provider::Hmac), None);
        assert_eq!(known_types(Provider::Token), None);
        for key in [
            "payment_intent.succeded",
            "user.created",
            "anything.*",
            CATCH_ALL,
        ] {
            assert_eq!(is_known(Provider::Standard, key), None, "{key}");
            assert_eq!(suggestion(Provider::Standard, key), None, "{key}");
        }
    }

    #[test]
    fn typos_are_unknown_with_the_closest_type_suggested() {
        let cases = [
            (
                Provider::Stripe,
                "payment_intent.succeded",
                "payment_intent.succeeded",
            ),
            (
                Provider::Stripe,
                "payment_intnet.succeeded",
                "payment_intent.succeeded",
            ),
            (Provider::Stripe, "Charge.refunded", "charge.refunded"),
            (Provider::Stripe, "invoice.payed", "invoice.paid"),
            (
                Provider::Github,
                "pull_request.opend",
                "pull_request.opened",
            ),
            (Provider::Github, "pull_requests", "pull_request"),
            (Provider::Github, "issue.closed", "issues.closed"),
            (Provider::Slack, "app_menton", "app_mention"),
            (Provider::Slack, "reaction_add", "reaction_added"),
            // A subscription name, not a type: those subscriptions deliver `message`.
            (Provider::Slack, "message.channels", "message"),
            (Provider::Slack, "message.im", "message"),
            (Provider::Shopify, "orders/created", "orders/create"),
            (Provider::Shopify, "orders.create", "orders/create"),
            (Provider::Shopify, "order/paid", "orders/paid"),
            (Provider::Shopify, "app/uninstall", "app/uninstalled"),
            (Provider::Shopify, "customer/redact", "customers/redact"),
            (
                Provider::Paddle,
                "subscription.cancelled",
                "subscription.canceled",
            ),
            (
                Provider::Paddle,
                "transaction.complete",
                "transaction.completed",
            ),
            (Provider::Zoom, "meeting.strated", "meeting.started"),
            (Provider::Zoom, "recording.complete", "recording.completed"),
        ];
        for (provider, key, expected) in cases {
            assert_eq!(is_known(provider, key), Some(false), "{provider:?} {key}");
            assert_eq!(
                suggestion(provider, key),
                Some(expected),
                "{provider:?} {key}"
            );
        }
    }

    #[test]
    fn pattern_typos_suggest_a_known_prefix() {
        assert_eq!(suggestion(Provider::Stripe, "custmer.*"), Some("customer"));
        assert_eq!(
            suggestion(Provider::Stripe, "customer.subscriptions.*"),
            Some("customer.subscription")
        );
        assert_eq!(
            suggestion(Provider::Github, "pull_reqest.*"),
            Some("pull_request")
        );
    }

    #[test]
    fn nothing_is_suggested_when_nothing_is_close() {
        for (provider, key) in [
            (Provider::Stripe, "zzz_unrelated"),
            (Provider::Stripe, "customer.subscription"),
            (
                Provider::Github,
                "deployment_protection_rules.requested_now",
            ),
            // Keys shorter than three bytes get no suggestion: one edit from them is
            // anything.
            (Provider::Github, "pr"),
            (Provider::Slack, "message.*"),
            // No Shopify topic has the prefix `orders.`, and `customer` is too far from it.
            (Provider::Shopify, "orders.*"),
            (Provider::Zoom, "endpoint.url_validation"),
        ] {
            assert_eq!(is_known(provider, key), Some(false), "{provider:?} {key}");
            assert_eq!(suggestion(provider, key), None, "{provider:?} {key}");
        }
    }

    #[test]
    fn repository_dispatch_actions_are_free_form() {
        for key in [
            "repository_dispatch",
            "repository_dispatch.deploy",
            "repository_dispatch.sample.collected",
            "repository_dispatch.*",
            "repository_dispatch.deploy.*",
        ] {
            assert_eq!(is_known(Provider::Github, key), Some(true), "{key}");
        }
        assert_eq!(
            is_known(Provider::Github, "repository_dispach.deploy"),
            Some(false)
        );
        // Only GitHub's own event is free-form.
        assert_eq!(
            is_known(Provider::Stripe, "repository_dispatch.deploy"),
            Some(false)
        );
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        let cases = [
            ("", "", 0),
            ("", "abc", 3),
            ("abc", "", 3),
            ("abc", "abc", 0),
            ("abc", "abd", 1),
            ("abc", "abxc", 1),
            ("abc", "ac", 1),
            ("ab", "ba", 1),
            ("intnet", "intent", 1),
            ("kitten", "sitting", 3),
            ("ca", "abc", 3),
        ];
        for (from, to, expected) in cases {
            assert_eq!(
                edit_distance(from.as_bytes(), to.as_bytes()),
                expected,
                "{from:?} → {to:?}"
            );
        }
    }

    const CONFIG: &str = r#"
[[integration]]
id = "stripe-acme"
provider = "stripe"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"payment_intent.succeded" = { handler = "orders.mark_paid" }
"charge.refunded" = { handler = "orders.refund" }
"customer.*" = { handler = "crm.sync" }
"custmer.subscription.*" = { handler = "crm.sync" }
"zzz_unrelated" = { handler = "crm.sync" }

[[integration]]
id = "gh"
provider = "github"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"*" = { handler = "audit.log" }
"pull_request.opend" = { handler = "ci.start" }
"push" = { handler = "ci.start" }
"repository_dispatch.deploy" = { handler = "ci.deploy" }

[[integration]]
id = "slack-acme"
provider = "slack"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"app_menton" = { handler = "bot.reply" }
"message" = { handler = "bot.reply" }
"message.channels" = { handler = "bot.reply" }

[[integration]]
id = "hooks"
provider = "standard"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"anything.goes" = { handler = "hooks.take" }
"#;

    fn config(text: &str) -> Config {
        Config::from_toml(text, &|_| {
            Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned())
        })
        .expect("the test configuration is valid")
    }

    #[test]
    fn route_key_warnings_name_each_unknown_key_once() {
        assert_eq!(
            route_key_warnings(&config(CONFIG)),
            [
                r#"integration stripe-acme: route "custmer.subscription.*" matches no event type stripe sends (did you mean "customer.subscription.*"?): deliveries of it would be answered 200 ignored"#,
                r#"integration stripe-acme: route "payment_intent.succeded" is not an event type stripe sends (did you mean "payment_intent.succeeded"?): deliveries of it would be answered 200 ignored"#,
                r#"integration stripe-acme: route "zzz_unrelated" is not an event type stripe sends: deliveries of it would be answered 200 ignored"#,
                r#"integration gh: route "pull_request.opend" is not an event type github sends (did you mean "pull_request.opened"?): it never matches, so deliveries meant for it go to the catch-all route "*""#,
                r#"integration slack-acme: route "app_menton" is not an event type slack sends (did you mean "app_mention"?): deliveries of it would be answered 200 ignored"#,
                r#"integration slack-acme: route "message.channels" is not an event type slack sends (did you mean "message"?): deliveries of it would be answered 200 ignored"#,
            ]
        );
    }

    #[test]
    fn route_key_warnings_are_empty_when_every_key_is_known() {
        let text = CONFIG
            .replace("payment_intent.succeded", "payment_intent.succeeded")
            .replace("custmer.subscription.*", "customer.subscription.*")
            .replace("\"zzz_unrelated\"", "\"invoice.paid\"")
            .replace("pull_request.opend", "pull_request.opened")
            .replace("app_menton", "app_mention")
            .replace("\"message.channels\"", "\"reaction_added\"");
        assert_eq!(route_key_warnings(&config(&text)), Vec::<String>::new());
    }

    const SHOPIFY_CONFIG: &str = r#"
[[integration]]
id = "shop-acme"
provider = "shopify"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"orders/created" = { handler = "orders.create" }
"orders/paid" = { handler = "orders.mark_paid" }
"customers/data_request" = { handler = "privacy.export" }
"customers/redact" = { handler = "privacy.erase" }
"shop/redact" = { handler = "privacy.erase_shop" }
"#;

    #[test]
    fn shopify_typos_warn_and_compliance_topics_do_not() {
        assert_eq!(
            route_key_warnings(&config(SHOPIFY_CONFIG)),
            [
                r#"integration shop-acme: route "orders/created" is not an event type shopify sends (did you mean "orders/create"?): deliveries of it would be answered 200 ignored"#,
            ]
        );
        let fixed = SHOPIFY_CONFIG.replace("orders/created", "orders/create");
        assert_eq!(route_key_warnings(&config(&fixed)), Vec::<String>::new());
    }

    /// A pattern ends in `.*`, so no pattern can stand for the topics of one Shopify
    /// resource: the configuration refuses `orders/*` before any warning is looked for.
    #[test]
    fn shopify_topics_cannot_be_patterned_at_their_slash() {
        let text = SHOPIFY_CONFIG.replace("\"orders/created\"", "\"orders/*\"");
        let Err(error) = Config::from_toml(&text, &|_| {
            Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned())
        }) else {
            panic!("orders/* must be refused");
        };
        assert!(error.to_string().contains("`prefix.*`"), "{error}");
    }

    #[test]
    fn paddle_and_zoom_typos_warn() {
        let text = r#"
[[integration]]
id = "paddle-acme"
provider = "paddle"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"transaction.completed" = { handler = "billing.fulfil" }
"subscription.cancelled" = { handler = "billing.revoke" }

[[integration]]
id = "zoom-acme"
provider = "zoom"
tenant = "acme"
secrets = ["env:GOOD"]

[integration.routes]
"meeting.ended" = { handler = "meetings.close" }
"recording.complete" = { handler = "meetings.archive" }
"#;
        assert_eq!(
            route_key_warnings(&config(text)),
            [
                r#"integration paddle-acme: route "subscription.cancelled" is not an event type paddle sends (did you mean "subscription.canceled"?): deliveries of it would be answered 200 ignored"#,
                r#"integration zoom-acme: route "recording.complete" is not an event type zoom sends (did you mean "recording.completed"?): deliveries of it would be answered 200 ignored"#,
            ]
        );
    }
}
