//! What extracting an event allocates, counted by a global allocator (this file holds one
//! test, so nothing else allocates beside it): reading a configured sender's fields never
//! builds the body as a tree, which for tiny values is ~16× the body and lies outside the
//! body budget.

use std::alloc::System;

use cap::Cap;
use inbound_core::config::Config;
use inbound_core::event::Extracted;
use inbound_core::headers::Headers;
use inbound_core::provider;

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

#[test]
fn configured_fields_are_read_without_building_the_body() {
    let config = Config::from_toml(
        r#"
[[integration]]
id = "custom"
provider = "hmac"
tenant = "acme"
secrets = ["env:S"]
routes = { "thing.happened" = { handler = "forward", sink = "s" } }
[integration.hmac]
header = "x-sig"
algorithm = "sha256"
encoding = "hex"
[integration.fields]
event_id = { pointer = "/id" }
event_type = { pointer = "/type" }
scope = { pointer = "/nested/account" }

[[sink]]
id = "s"
url = "http://sink.internal/"
"#,
        &|_| Some("secret".to_owned()),
    )
    .expect("config");
    let integration = config.integration("custom").expect("integration");
    // ~1 MiB of the smallest values JSON has, the fields after them.
    let padding = vec!["0"; 512 * 1024].join(",");
    let body = format!(
        r#"{{"pad":[{padding}],"id":"evt_1","type":"thing.happened","nested":{{"account":"a1"}}}}"#
    );
    let headers = Headers::default();
    let before = ALLOCATOR.total_allocated();
    let extracted = provider::extract(integration, &headers, body.as_bytes());
    let allocated_bytes = ALLOCATOR.total_allocated() - before;
    let Ok(Extracted::Event(event)) = extracted else {
        panic!("extracted: {extracted:?}");
    };
    assert_eq!(event.event_id.as_str(), "evt_1");
    assert_eq!(event.event_type, "thing.happened");
    assert!(
        allocated_bytes < 64 * 1024,
        "extracting a {} byte body allocated {allocated_bytes} bytes",
        body.len()
    );
}
