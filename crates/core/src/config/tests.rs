//! Config validation: every start-up failure the issue names, as one line naming the field.

use super::*;

const SECRET_VALUE: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn env(name: &str) -> Option<String> {
    match name {
        "GOOD" => Some(SECRET_VALUE.to_owned()),
        "NOT_BASE64" => Some("whsec_***not base64***".to_owned()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

const VALID: &str = r#"
[[integration]]
id = "stripe-acme"
provider = "stripe"
tenant = "acme"
secrets = ["env:GOOD"]
expect = { account = "acct_123", livemode = true }

[integration.routes]
"payment_intent.succeeded" = { handler = "orders.mark_paid", sink = "fulfillment" }
"charge.refunded" = { handler = "orders.refund" }

[integration.entitlements]
"price_pro_monthly" = "pro"

[[integration]]
id = "hooks"
provider = "standard"
tenant = "acme"
secrets = ["env:GOOD"]
max_body_bytes = 4096
tolerance_secs = 60

[[sink]]
id = "fulfillment"
url = "http://fulfillment.internal/orders"
idempotency_header = "Idempotency-Key"
status_url = "http://fulfillment.internal/operations/{key}"
"#;

fn error_of(text: &str) -> String {
    Config::from_toml(text, &env)
        .expect_err("config must be refused")
        .to_string()
}

#[test]
fn valid_config_parses_with_defaults() {
    let config = Config::from_toml(VALID, &env).expect("valid");
    let stripe = config.integration("stripe-acme").expect("present");
    assert_eq!(stripe.provider, Provider::Stripe);
    assert_eq!(stripe.tolerance_secs, DEFAULT_TOLERANCE_SECS);
    assert_eq!(stripe.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
    assert_eq!(stripe.expect.livemode, Some(true));
    assert_eq!(stripe.secrets[0].expose(), SECRET_VALUE.as_bytes());
    let hooks = config.integration("hooks").expect("present");
    assert_eq!(hooks.max_body_bytes, 4096);
    // Standard Webhooks keys are stored decoded.
    assert_eq!(hooks.secrets[0].expose().len(), 24);
    let sink = config.sink("fulfillment").expect("sink");
    assert_eq!(
        sink.idempotency_retention_secs,
        DEFAULT_IDEMPOTENCY_RETENTION_SECS
    );
    assert_eq!(sink.timeout_secs, DEFAULT_SINK_TIMEOUT_SECS);
    assert!(config.integration("nope").is_none());
}

#[test]
fn unknown_provider_names_the_field() {
    let error = error_of(&VALID.replacen("provider = \"stripe\"", "provider = \"strip\"", 1));
    assert!(
        error.starts_with("integration[0] (stripe-acme).provider: unknown provider \"strip\""),
        "{error}"
    );
}

#[test]
fn missing_or_empty_secret_names_the_field() {
    let error = error_of(&VALID.replacen("env:GOOD", "env:ABSENT", 1));
    assert_eq!(
        error,
        "integration[0] (stripe-acme).secrets[0]: environment variable ABSENT is not set or is empty"
    );
    let error = error_of(&VALID.replacen("env:GOOD", "env:EMPTY", 1));
    assert!(
        error.contains("secrets[0]") && error.contains("EMPTY"),
        "{error}"
    );
    let error = error_of(&VALID.replacen("[\"env:GOOD\"]", "[]", 1));
    assert!(
        error.starts_with("integration[0] (stripe-acme).secrets:"),
        "{error}"
    );
}

#[test]
fn literal_secret_is_refused_without_echo() {
    let error = error_of(&VALID.replacen("env:GOOD", "sk_live_dont_print_me", 1));
    assert!(
        error.contains("secrets[0]") && !error.contains("sk_live_dont_print_me"),
        "{error}"
    );
}

#[test]
fn duplicate_integration_id_is_refused() {
    let error = error_of(&VALID.replacen("id = \"hooks\"", "id = \"stripe-acme\"", 1));
    assert_eq!(
        error,
        "integration[1] (stripe-acme).id: duplicate integration id"
    );
}

#[test]
fn any_handler_name_loads_and_the_worker_names_the_route_it_cannot_run() {
    // The ingress and check-config cannot know a custom worker's handlers.
    let config = Config::from_toml(&VALID.replacen("orders.refund", "orders.refnd", 1), &env)
        .expect("any handler name is accepted");
    let error = config
        .check_handlers(&["orders.mark_paid", "orders.refund", "forward"], &|_| true)
        .expect_err("a worker without orders.refnd refuses it")
        .to_string();
    assert!(
        error.starts_with(
            "integration[0] (stripe-acme).routes.\"charge.refunded\".handler: handler \"orders.refnd\" is not registered"
        ),
        "{error}"
    );
    config
        .check_handlers(&["orders.mark_paid", "orders.refnd"], &|_| true)
        .expect("every routed handler registered");
    // A worker pinned to other integrations does not need stripe-acme's handlers.
    config
        .check_handlers(&["forward"], &|id| id != "stripe-acme")
        .expect("only the claimed integrations' routes are checked");
}

#[test]
fn route_to_unknown_sink_or_forward_without_sink_is_refused() {
    let error = error_of(&VALID.replacen("sink = \"fulfillment\"", "sink = \"nowhere\"", 1));
    assert!(
        error.contains(".routes.\"payment_intent.succeeded\".sink: unknown sink \"nowhere\""),
        "{error}"
    );
    let error = error_of(&VALID.replacen(
        "{ handler = \"orders.refund\" }",
        "{ handler = \"forward\" }",
        1,
    ));
    assert!(error.contains("forward handler needs a sink"), "{error}");
}

#[test]
fn bad_standard_secret_encoding_is_refused() {
    let text = VALID.replacen(
        "secrets = [\"env:GOOD\"]\nmax_body_bytes",
        "secrets = [\"env:NOT_BASE64\"]\nmax_body_bytes",
        1,
    );
    let error = error_of(&text);
    assert!(
        error.starts_with(
            "integration[1] (hooks).secrets[0]: env:NOT_BASE64 is not a Standard Webhooks secret"
        ),
        "{error}"
    );
    assert!(!error.contains("not base64***"), "{error}");
}

#[test]
fn expect_keys_must_fit_the_provider() {
    let error = error_of(&VALID.replacen("account = \"acct_123\"", "team_id = \"T1\"", 1));
    assert_eq!(
        error,
        "integration[0] (stripe-acme).expect.team_id: does not apply to provider stripe"
    );
}

#[test]
fn syntax_and_schema_errors_are_one_line_with_position() {
    let error = error_of("[[integration]]\nid = \"x\"\nprovider = 5\n");
    assert!(error.starts_with("config line 3, column"), "{error}");
    assert!(!error.contains('\n'), "{error}");
    let error = error_of("[[integration]]\nid = \"x\"\nprovder = \"stripe\"\n");
    assert!(
        error.contains("line 3") && error.contains("provder"),
        "{error}"
    );
}

#[test]
fn ids_and_limits_are_checked() {
    let error = error_of(&VALID.replacen("id = \"hooks\"", "id = \"has space\"", 1));
    assert!(
        error.starts_with("integration[1] (has space).id:"),
        "{error}"
    );
    let error = error_of(&VALID.replacen("max_body_bytes = 4096", "max_body_bytes = 0", 1));
    assert!(error.contains("(hooks).max_body_bytes"), "{error}");
    let error = error_of(&VALID.replacen("http://fulfillment.internal/orders", "ftp://x", 1));
    assert_eq!(
        error,
        "sink[0] (fulfillment).url: must be an http:// or https:// URL"
    );
    let error = error_of(&VALID.replacen("operations/{key}", "operations/", 1));
    assert!(
        error.starts_with("sink[0] (fulfillment).status_url"),
        "{error}"
    );
}

#[test]
fn debug_output_never_contains_secret_values() {
    let config = Config::from_toml(VALID, &env).expect("valid");
    let rendered = format!("{config:?}");
    assert!(!rendered.contains(SECRET_VALUE));
    assert!(!rendered.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"));
}

fn with_routes(routes: &str) -> String {
    VALID.replacen(
        "\"charge.refunded\" = { handler = \"orders.refund\" }",
        routes,
        1,
    )
}

#[test]
fn patterns_are_a_prefix_dot_star_or_the_whole_key_star() {
    let config = Config::from_toml(
        &with_routes("\"invoice.*\" = { handler = \"h\" }\n\"*\" = { handler = \"h\" }"),
        &env,
    )
    .expect("valid patterns");
    assert!(config.integrations()[0].routes.contains_key("invoice.*"));
    for key in ["invoice*", "*.paid", "in*voice.paid", ".*", "invoice.**"] {
        let error = error_of(&with_routes(&format!("\"{key}\" = {{ handler = \"h\" }}")));
        assert!(
            error.contains("`*` may only end a pattern"),
            "{key}: {error}"
        );
    }
}

#[test]
fn options_reach_the_route_as_json_and_only_forward_fans_out() {
    let config = Config::from_toml(
        &(with_routes(
            "\"charge.refunded\" = { handler = \"h\", options = { mode = \"strict\", limit = 3, prices = { p1 = \"pro\" } } }\n\"charge.updated\" = { handler = \"forward\", sinks = [\"fulfillment\", \"audit\"] }",
        ) + "\n[[sink]]\nid = \"audit\"\nurl = \"http://audit.internal/\"\n"),
        &env,
    )
    .expect("valid");
    let routes = &config.integrations()[0].routes;
    assert_eq!(
        routes["charge.refunded"].options,
        serde_json::json!({"mode": "strict", "limit": 3, "prices": {"p1": "pro"}})
    );
    assert_eq!(routes["charge.refunded"].sinks, Vec::<String>::new());
    assert_eq!(routes["charge.updated"].sinks, ["fulfillment", "audit"]);
    assert_eq!(routes["charge.updated"].sink(), Some("fulfillment"));
    assert_eq!(
        routes["payment_intent.succeeded"].options,
        serde_json::json!({})
    );

    let error = error_of(&with_routes(
        "\"charge.refunded\" = { handler = \"h\", sinks = [\"fulfillment\", \"fulfillment\"] }",
    ));
    assert!(error.contains("named twice"), "{error}");
    let error = error_of(&with_routes(
        "\"charge.refunded\" = { handler = \"orders.refund\", sinks = [\"fulfillment\", \"nowhere\"] }",
    ));
    assert!(error.contains("unknown sink \"nowhere\""), "{error}");
    let error = error_of(
        &(with_routes(
            "\"charge.refunded\" = { handler = \"orders.refund\", sinks = [\"fulfillment\", \"audit\"] }",
        ) + "\n[[sink]]\nid = \"audit\"\nurl = \"http://audit.internal/\"\n"),
    );
    assert!(
        error.contains("only forward sends to several sinks"),
        "{error}"
    );
    let error = error_of(&with_routes(
        "\"charge.refunded\" = { handler = \"forward\", sink = \"fulfillment\", sinks = [\"fulfillment\"] }",
    ));
    assert!(error.contains("either `sink` or `sinks`"), "{error}");
    let error = error_of(&with_routes(
        "\"charge.refunded\" = { handler = \"h\", options = { at = 1979-05-27 } }",
    ));
    assert!(error.contains(".options: cannot be passed"), "{error}");
}

#[test]
fn owners_silence_and_provider_timeouts_are_read_and_checked() {
    let text = VALID
        .replace(
            "tenant = \"acme\"\nsecrets = [\"env:GOOD\"]\nexpect",
            "tenant = \"acme\"\nowner = \"team-payments\"\nalert_when_silent_secs = 21600\nsecrets = [\"env:GOOD\"]\nexpect",
        )
        .replace(
            "idempotency_header = \"Idempotency-Key\"",
            "idempotency_header = \"Idempotency-Key\"\nowner = \"fulfillment-oncall\"",
        );
    let config = Config::from_toml(&text, &env).expect("valid");
    let stripe = config.integration("stripe-acme").expect("stripe-acme");
    assert_eq!(stripe.owner.as_deref(), Some("team-payments"));
    assert_eq!(stripe.alert_when_silent_secs, Some(21600));
    assert_eq!(
        stripe.provider_timeout_secs,
        Provider::Stripe.delivery_timeout_secs()
    );
    let hooks = config.integration("hooks").expect("hooks");
    assert_eq!(hooks.owner, None, "an owner is optional");
    assert_eq!(
        hooks.alert_when_silent_secs, None,
        "no silence alert unless asked"
    );
    assert_eq!(
        config.sinks()[0].owner.as_deref(),
        Some("fulfillment-oncall")
    );
    let timeout = VALID.replace(
        "max_body_bytes = 4096",
        "max_body_bytes = 4096\nprovider_timeout_secs = 5",
    );
    let config = Config::from_toml(&timeout, &env).expect("valid");
    assert_eq!(
        config
            .integration("hooks")
            .expect("hooks")
            .provider_timeout_secs,
        5
    );
}

/// An owner outside the id alphabet, a silence outside its range and a zero provider timeout
/// are refused with the field named.
#[test]
fn owners_silence_and_provider_timeouts_out_of_range_are_refused() {
    // An owner becomes a metric label and an alert route: the id alphabet, never free text.
    let spaced = VALID.replace(
        "tenant = \"acme\"\nsecrets",
        "tenant = \"acme\"\nowner = \"team payments\"\nsecrets",
    );
    assert!(
        error_of(&spaced).contains(".owner"),
        "{}",
        error_of(&spaced)
    );
    // A silence shorter than a minute would page between two ordinary deliveries.
    let long = VALID.replace(
        "tolerance_secs = 60",
        "tolerance_secs = 60\nalert_when_silent_secs = 864000",
    );
    assert!(
        error_of(&long).contains("alert_when_silent_secs"),
        "{}",
        error_of(&long)
    );
    let short = VALID.replace(
        "tolerance_secs = 60",
        "tolerance_secs = 60\nalert_when_silent_secs = 30",
    );
    assert!(
        error_of(&short).contains("alert_when_silent_secs"),
        "{}",
        error_of(&short)
    );
    let zero = VALID.replace(
        "tolerance_secs = 60",
        "tolerance_secs = 60\nprovider_timeout_secs = 0",
    );
    assert!(
        error_of(&zero).contains("provider_timeout_secs"),
        "{}",
        error_of(&zero)
    );
}

/// An integration of a configurable provider, with `tables` after its header.
fn configurable(provider: &str, tables: &str) -> String {
    format!(
        "[[integration]]\nid = \"custom\"\nprovider = \"{provider}\"\ntenant = \"acme\"\nsecrets = [\"env:GOOD\"]\n{tables}"
    )
}

/// An `hmac` integration with `table` as its `[integration.hmac]` and fields read from a
/// header and the body.
fn hmac_integration(table: &str) -> String {
    configurable(
        "hmac",
        &format!(
            "[integration.hmac]\n{table}\n[integration.fields]\nevent_id = {{ header = \"X-Id\" }}\nevent_type = {{ pointer = \"/type\" }}\n"
        ),
    )
}

/// A valid `[integration.hmac]` table the cases below change one thing of.
const HMAC_BASE: &str = "header = \"X-Sig\"\nalgorithm = \"sha256\"\nencoding = \"hex\"";

/// `[integration.hmac]` tables that would verify nothing, each with the field its error
/// names and what the error says.
fn hmac_tables_that_verify_nothing() -> Vec<(String, &'static str, &'static str)> {
    let base = HMAC_BASE;
    vec![
        (
            "header = \"\"\nalgorithm = \"sha256\"\nencoding = \"hex\"".to_string(),
            "hmac.header",
            "header name",
        ),
        (
            "header = \"X Sig\"\nalgorithm = \"sha256\"\nencoding = \"hex\"".to_string(),
            "hmac.header",
            "header name",
        ),
        (
            "header = \"X-Sig\"\nalgorithm = \"md5\"\nencoding = \"hex\"".to_string(),
            "hmac.algorithm",
            "sha1, sha256 or sha512",
        ),
        (
            "header = \"X-Sig\"\nalgorithm = \"sha256\"\nencoding = \"base32\"".to_string(),
            "hmac.encoding",
            "hex or base64",
        ),
        (
            format!("{base}\nsigned = \"\""),
            "hmac.signed",
            "{body} exactly once",
        ),
        (
            format!("{base}\nsigned = \"{{timestamp}}\""),
            "hmac.signed",
            "{body} exactly once",
        ),
        (
            format!("{base}\nsigned = \"{{body}}{{body}}\""),
            "hmac.signed",
            "{body} exactly once",
        ),
        (
            format!("{base}\nsigned = \"{{id}}.{{body}}\""),
            "hmac.signed",
            "only {timestamp} and {body}",
        ),
        (
            format!("{base}\nsigned = \"{{timestamp}}.{{body}}\""),
            "hmac.timestamp_header",
            "name the header",
        ),
        (
            format!("{base}\ntimestamp_header = \"X-Ts\""),
            "hmac.timestamp_header",
            "proves no freshness",
        ),
        (
            format!("{base}\nseparator = \"\""),
            "hmac.separator",
            "must not be empty",
        ),
        (
            format!("{base}\nprefix = \"t=1,v1=\"\nseparator = \",\""),
            "hmac.separator",
            "occurs in the prefix",
        ),
        (
            format!("{base}\ntimestamp_unit = \"seconds\""),
            "hmac.timestamp_unit",
            "signs no {timestamp}",
        ),
        (
            format!(
                "{base}\nsigned = \"{{timestamp}}.{{body}}\"\ntimestamp_header = \"X-Ts\"\ntimestamp_unit = \"hours\""
            ),
            "hmac.timestamp_unit",
            "seconds or milliseconds",
        ),
    ]
}

/// A configurable `hmac` scheme that would verify nothing is refused with the field named.
#[test]
fn configurable_schemes_that_would_verify_nothing_are_refused() {
    let valid = hmac_integration(HMAC_BASE);
    assert!(Config::from_toml(&valid, &env).is_ok(), "{valid}");
    for (table, field, says) in hmac_tables_that_verify_nothing() {
        let error = error_of(&hmac_integration(&table));
        assert!(
            error.contains(field) && error.contains(says),
            "{table}: {error}"
        );
    }
}

/// The scheme and field tables belong together, and only to the configurable providers; a
/// field is read from one place, never from the signature, and a scope from somewhere.
#[test]
fn configurable_scheme_and_field_tables_that_read_from_nowhere_are_refused() {
    let base = HMAC_BASE;
    let with = configurable;
    // The tables belong together, and only to the configurable providers.
    let no_fields = with("hmac", &format!("[integration.hmac]\n{base}\n"));
    assert!(
        error_of(&no_fields).contains("fields"),
        "{}",
        error_of(&no_fields)
    );
    let no_scheme = with(
        "token",
        "[integration.fields]\nevent_id = { header = \"X-Id\" }\nevent_type = { header = \"X-Type\" }\n",
    );
    assert!(
        error_of(&no_scheme).contains("token"),
        "{}",
        error_of(&no_scheme)
    );
    let on_stripe = with("stripe", "[integration.token]\nheader = \"X-Token\"\n");
    assert!(error_of(&on_stripe).contains("applies to providers hmac and token only"));
    let both_sources = with(
        "token",
        "[integration.token]\nheader = \"X-Token\"\n[integration.fields]\nevent_id = { header = \"X-Id\", pointer = \"/id\" }\nevent_type = { header = \"X-Type\" }\n",
    );
    assert!(error_of(&both_sources).contains("either header or pointer"));
    let bad_pointer = with(
        "token",
        "[integration.token]\nheader = \"X-Token\"\n[integration.fields]\nevent_id = { pointer = \"id\" }\nevent_type = { header = \"X-Type\" }\n",
    );
    assert!(error_of(&bad_pointer).contains("starting with '/'"));
    let reads_the_token = with(
        "token",
        "[integration.token]\nheader = \"X-Token\"\n[integration.fields]\nevent_id = { header = \"x-token\" }\nevent_type = { header = \"X-Type\" }\n",
    );
    assert!(error_of(&reads_the_token).contains("must not read the signature or token header"));
    let scope_from_nowhere = with(
        "token",
        "expect = { scope = \"42\" }\n[integration.token]\nheader = \"X-Token\"\n[integration.fields]\nevent_id = { header = \"X-Id\" }\nevent_type = { header = \"X-Type\" }\n",
    );
    assert!(error_of(&scope_from_nowhere).contains("needs [integration.fields].scope"));
}

/// A Standard Webhooks integration may list `whpk_` public keys (for `v1a`) beside or
/// instead of `whsec_` secrets; a malformed one is refused, naming the reference only.
#[test]
fn standard_integrations_take_public_keys() {
    let with = |reference: &str| {
        format!(
            "[[integration]]\nid = \"std\"\nprovider = \"standard\"\ntenant = \"acme\"\nsecrets = [\"{reference}\"]\n"
        )
    };
    let keys = |name: &str| match name {
        // The v1a vectors' key; an all-zero one would be a small-order point, refused.
        "PK" => Some("whpk_A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=".to_owned()),
        "BAD_PK" => Some("whpk_AAAA".to_owned()),
        _ => env(name),
    };
    let config = Config::from_toml(&with("env:PK"), &keys).expect("a public key alone");
    let integration = config.integration("std").expect("std");
    assert_eq!(
        (integration.secrets.len(), integration.public_keys.len()),
        (0, 1)
    );
    let error = Config::from_toml(&with("env:BAD_PK"), &keys)
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("env:BAD_PK") && error.contains("public key"),
        "{error}"
    );
    assert!(!error.contains("AAAA"), "the value is never shown: {error}");
}

#[test]
fn a_stripe_endpoint_says_whose_events_it_receives_once() {
    let with = |stripe: &str, expect: &str| {
        Config::from_toml(
            &format!(
                "[[integration]]\nid = \"s\"\nprovider = \"stripe\"\ntenant = \"t\"\nsecrets = [\"env:S\"]\n{expect}\n{stripe}\n"
            ),
            &|_| Some("whsec_x".to_owned()),
        )
    };
    let direct = with("stripe = { account = \"acct_1\" }", "").expect("direct");
    assert_eq!(
        direct.integration("s").expect("s").stripe_endpoint(),
        Some(crate::config::StripeEndpoint::Account("acct_1".to_owned()))
    );
    let implied = with("", "expect = { account = \"acct_2\" }").expect("connect");
    assert_eq!(
        implied.integration("s").expect("s").stripe_endpoint(),
        Some(crate::config::StripeEndpoint::Connect)
    );
    for (stripe, expect, message) in [
        ("stripe = {}", "", "exactly one of"),
        (
            "stripe = { account = \"acct_1\", connect = true }",
            "",
            "exactly one of",
        ),
        ("stripe = { account = \"x\" }", "", "acct_"),
        (
            "stripe = { account = \"acct_1\" }",
            "expect = { account = \"acct_2\" }",
            "account endpoint",
        ),
    ] {
        let error = with(stripe, expect).expect_err(stripe).to_string();
        assert!(error.contains(message), "{stripe}: {error}");
    }
}

/// A GitHub hook sends the content type it was created with: `form` unless the
/// integration says `json`; no other value, and no other provider, takes the field.
#[test]
fn content_type_is_githubs_form_or_json() {
    let github = |extra: &str| {
        format!(
            "[[integration]]\nid = \"gh\"\nprovider = \"github\"\ntenant = \"t\"\nsecrets = [\"env:GOOD\"]\n{extra}\n"
        )
    };
    let of = |text: &str| {
        Config::from_toml(text, &env)
            .expect("valid")
            .integration("gh")
            .expect("gh")
            .github_content_type
    };
    assert_eq!(of(&github("")), Some(GithubContentType::Form));
    assert_eq!(
        of(&github("content_type = \"form\"")),
        Some(GithubContentType::Form)
    );
    assert_eq!(
        of(&github("content_type = \"json\"")),
        Some(GithubContentType::Json)
    );
    let error = error_of(&github("content_type = \"application/json\""));
    assert!(
        error.contains("integration[0] (gh).content_type") && error.contains("\"form\""),
        "{error}"
    );
    let stripe = VALID.replacen(
        "expect = { account",
        "content_type = \"json\"\nexpect = { account",
        1,
    );
    let error = error_of(&stripe);
    assert!(error.contains("applies to provider github only"), "{error}");
    let config = Config::from_toml(VALID, &env).expect("valid");
    assert_eq!(
        config
            .integration("stripe-acme")
            .expect("stripe")
            .github_content_type,
        None
    );
}
