//! `inboundctl sign-event`: the curl command it prints is accepted by a running ingress,
//! for each provider's way of naming the event, with only the secret it signs with.

use super::*;

/// GitHub names the event in a header: `--event-type` sets it, so a routed GitHub event
/// can be tried (without it the command sends `ping`, which no route takes); other
/// providers carry the type in the body and refuse the flag.
#[tokio::test]
async fn sign_event_sends_the_github_event_type_it_is_given() {
    let stack = Stack::start().await;
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |_| {});
    let body = r#"{"action":"opened","number":7,"repository":{"id":42,"full_name":"acme/app"}}"#;
    let base = format!("http://{}", stack.ingress.addr);
    let answer = sign_and_send(
        &path,
        "gh-acme",
        body,
        &base,
        &["--event-type", "pull_request"],
    )
    .expect("signed");
    assert_eq!(answer["status"], "accepted", "{answer}");
    assert_eq!(stack.database.receipt_count().await, 1);

    let refused = sign_and_send(&path, "stripe-acme", "{}", &base, &["--event-type", "x"])
        .expect_err("refused");
    assert!(refused.contains("--event-type"), "{refused}");

    // Two events sent within the same second are two events, not a duplicate.
    let other = r#"{"action":"opened","number":8,"repository":{"id":42,"full_name":"acme/app"}}"#;
    let again = sign_and_send(
        &path,
        "gh-acme",
        other,
        &base,
        &["--event-type", "pull_request"],
    )
    .expect("signed");
    assert_eq!(again["status"], "accepted", "{again}");
    assert_eq!(stack.database.receipt_count().await, 2);
}

/// Shopify names the topic in a header too: `--event-type` is required, and the request
/// carries the shop the integration expects, so it passes the scope check.
#[tokio::test]
async fn sign_event_sends_the_shopify_topic_it_is_given() {
    let stack = Stack::start().await;
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |_| {});
    let body = r#"{"id":820982911946154508,"email":"jon@example.com"}"#;
    let base = format!("http://{}", stack.ingress.addr);
    let answer = sign_and_send(
        &path,
        "shop-acme",
        body,
        &base,
        &["--event-type", "orders/create"],
    )
    .expect("signed");
    assert_eq!(answer["status"], "accepted", "{answer}");
    assert_eq!(stack.database.receipt_count().await, 1);

    let refused = sign_and_send(&path, "shop-acme", body, &base, &[]).expect_err("refused");
    assert!(refused.contains("--event-type"), "{refused}");
}

/// Runs `inboundctl sign-event` for `integration` (with `extra` flags), then the `curl`
/// command it printed: the ingress's JSON answer, or what sign-event said when it refused.
fn sign_and_send(
    config: &str,
    integration: &str,
    body: &str,
    base: &str,
    extra: &[&str],
) -> Result<serde_json::Value, String> {
    let mut args = vec![
        "sign-event",
        "--config",
        config,
        "--integration",
        integration,
        "--body",
        body,
        "--url",
        base,
    ];
    args.extend_from_slice(extra);
    let output = inboundctl(&args, &fixtures::secret_env());
    if !output.status.success() {
        return Err(text(&output.stderr));
    }
    let command = text(&output.stdout);
    let sent = Command::new("sh")
        .args(["-c", command.trim()])
        .output()
        .expect("run curl");
    Ok(serde_json::from_slice(&sent.stdout)
        .unwrap_or_else(|_| panic!("no JSON answer to {command}: {}", text(&sent.stdout))))
}

#[tokio::test]
async fn sign_event_prints_a_curl_command_the_ingress_accepts() {
    let stack = Stack::start().await;
    let scratch = ScratchDir::new();
    let path = write_config(&scratch, |_| {});
    let body = r#"{"id":"evt_from_curl","type":"payment_intent.succeeded","account":"acct_123","livemode":true}"#;
    let base = format!("http://{}", stack.ingress.addr);
    let answer = sign_and_send(&path, "stripe-acme", body, &base, &[]).expect("signed");
    assert_eq!(answer["status"], "accepted", "{answer}");
    assert_eq!(stack.database.receipt_count().await, 1);
}

/// `sign-event` needs the secret of the integration it signs for, and only that one: with
/// only `EXAMPLE_STRIPE_SECRET` set, `config/example.toml` signs a Stripe event (no
/// sink's or other integration's secret asked for), and without it the error names it.
#[test]
fn sign_event_needs_only_the_secret_of_the_integration_it_signs_for() {
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../config/example.toml")
        .display()
        .to_string();
    let body = r#"{"id":"evt_only_stripe","object":"event","type":"payment_intent.succeeded","livemode":false}"#;
    let args = [
        "sign-event",
        "--config",
        &config,
        "--integration",
        "stripe-example",
        "--body",
        body,
    ];
    let signed = inboundctl(
        &args,
        &[(
            "EXAMPLE_STRIPE_SECRET".to_owned(),
            "whsec_only_this_one".to_owned(),
        )],
    );
    assert!(signed.status.success(), "{}", text(&signed.stderr));
    assert!(
        text(&signed.stdout).contains("Stripe-Signature"),
        "{}",
        text(&signed.stdout)
    );
    let unsigned = inboundctl(&args, &[]);
    assert_eq!(unsigned.status.code(), Some(1));
    assert!(
        text(&unsigned.stderr).contains("EXAMPLE_STRIPE_SECRET"),
        "{}",
        text(&unsigned.stderr)
    );
}
