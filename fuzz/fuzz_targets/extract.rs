//! Arbitrary bodies and headers through payload extraction for every provider: an event,
//! a challenge or a clean refusal, never a panic; an accepted event's payload re-parses.
#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use inbound_core::config::Config;
use inbound_core::event::{self, Extracted};
use inbound_core::headers::Headers;
use inbound_core::provider;
use libfuzzer_sys::fuzz_target;

const HEADER_NAMES: &[&str] = &[
    "webhook-id",
    "x-github-delivery",
    "x-github-event",
    "x-github-hook-installation-target-id",
    // GitHub's form encoding: the `payload` field is read out of the body.
    "content-type",
];

const CONFIG: &str = r#"
[[integration]]
id = "s"
provider = "stripe"
tenant = "t"
secrets = ["env:K"]
expect = { account = "acct_1", livemode = true }
routes = { "a" = { handler = "forward", sink = "x" } }
[[integration]]
id = "g"
provider = "github"
tenant = "t"
secrets = ["env:K"]
expect = { installation_target_id = "42" }
routes = { "push" = { handler = "forward", sink = "x" } }
[[integration]]
id = "l"
provider = "slack"
tenant = "t"
secrets = ["env:K"]
expect = { team_id = "T1", api_app_id = "A1" }
[[integration]]
id = "w"
provider = "standard"
tenant = "t"
secrets = ["env:K"]
[[sink]]
id = "x"
url = "http://x/"
"#;

fn config() -> &'static Config {
    static CONFIG_ONCE: OnceLock<Config> = OnceLock::new();
    CONFIG_ONCE.get_or_init(|| {
        Config::from_toml(CONFIG, &|_| {
            Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned())
        })
        .expect("fuzz config")
    })
}

#[derive(Debug, Arbitrary)]
struct Delivered<'a> {
    headers: Vec<(u8, &'a [u8])>,
    body: &'a [u8],
}

fuzz_target!(|delivered: Delivered<'_>| {
    let headers: Headers = delivered
        .headers
        .iter()
        .map(|(name, value)| {
            (
                HEADER_NAMES[usize::from(*name) % HEADER_NAMES.len()],
                *value,
            )
        })
        .collect();
    for integration in config().integrations() {
        if let Ok(Extracted::Event(event)) =
            provider::extract(integration, &headers, delivered.body)
        {
            assert!(!event.event_id.as_str().is_empty());
            serde_json::from_str::<serde_json::Value>(&event.payload_json)
                .expect("an accepted payload is JSON");
            let _ = event::find_route(integration, &event);
        }
    }
});
