//! The testing kit a team's handler tests use (`inbound_worker::testing`), held to what its
//! documentation says: `send` names a handshake as one, `drain` waits only for what the
//! stack's worker takes, and `outcome` refuses an event id two integrations hold.

use std::time::Duration;

use inbound_worker::handlers::{Handler, HandlerError, HandlerInput, Transition};
use inbound_worker::testing::{TestStack, Verdict};
use inbound_worker::{ReceiptStatus, WorkerBuilder};

/// Applies every event, writing nothing.
struct Applies;

impl Handler for Applies {
    async fn apply(
        &self,
        _transaction: &mut sqlx::PgConnection,
        _input: HandlerInput<'_>,
    ) -> Result<Transition, HandlerError> {
        Ok(Transition::Applied {
            effects: Vec::new(),
        })
    }
}

const CONFIG: &str = r#"
[[integration]]
id = "stripe-a"
provider = "stripe"
tenant = "acme"
secrets = ["env:KIT_STRIPE"]
[integration.routes]
"thing.happened" = { handler = "kit.applies" }

[[integration]]
id = "stripe-b"
provider = "stripe"
tenant = "other"
secrets = ["env:KIT_STRIPE"]
[integration.routes]
"thing.happened" = { handler = "kit.applies" }

[[integration]]
id = "slack-acme"
provider = "slack"
tenant = "acme"
secrets = ["env:KIT_SLACK"]
[integration.routes]
"app_mention" = { handler = "kit.applies" }
"#;

const SECRETS: &[(&str, &str)] = &[("KIT_STRIPE", "whsec_kit_1"), ("KIT_SLACK", "kit-slack-2")];

fn registered(worker: WorkerBuilder) -> WorkerBuilder {
    worker.handler("kit.applies", Applies)
}

fn event(event_id: &str) -> String {
    serde_json::json!({
        "id": event_id, "object": "event", "type": "thing.happened", "created": 1,
        "livemode": false, "data": {"object": {"id": "thing_1"}}
    })
    .to_string()
}

/// A worker pinned to `stripe-a` never takes `stripe-b`'s receipts: `drain` waits for
/// `stripe-a`'s alone instead of timing out on receipts nobody here will claim. A Slack
/// URL verification is a handshake, not a refusal; an event id both integrations hold
/// is refused as ambiguous instead of read from whichever receipt came first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_waits_for_what_the_worker_takes_and_a_handshake_is_named() {
    let mut stack = TestStack::builder(CONFIG, SECRETS, registered)
        .worker_settings(|settings| settings.integrations(Some(vec!["stripe-a".to_owned()])))
        .database_prefix("inbound_kit_test_")
        .start()
        .await
        .expect("the stack starts");
    for (integration, event_id) in [
        ("stripe-a", "evt_a"),
        ("stripe-b", "evt_b"),
        ("stripe-b", "evt_shared"),
        ("stripe-a", "evt_shared"),
    ] {
        let verdict = stack
            .send(integration, &event(event_id), None)
            .await
            .expect("an answer");
        assert!(
            matches!(verdict, Verdict::Accepted { .. }),
            "{integration} {event_id}: {verdict:?}"
        );
    }
    stack
        .drain(Duration::from_secs(20))
        .await
        .expect("stripe-a drained");
    let applied = stack
        .outcome("evt_a", Duration::from_secs(1))
        .await
        .expect("finished");
    assert_eq!(applied.status, ReceiptStatus::Done);
    let waiting = stack
        .outcome("evt_b", Duration::from_millis(200))
        .await
        .expect_err("nobody here claims stripe-b");
    assert!(waiting.to_string().contains("still pending"), "{waiting}");
    let ambiguous = stack
        .outcome("evt_shared", Duration::from_secs(1))
        .await
        .expect_err("two integrations hold it");
    assert!(
        ambiguous
            .to_string()
            .contains("several integrations (stripe-a, stripe-b)"),
        "{ambiguous}"
    );
    let challenge =
        serde_json::json!({"type": "url_verification", "token": "t", "challenge": "c-42"})
            .to_string();
    let answered = stack
        .send("slack-acme", &challenge, None)
        .await
        .expect("an answer");
    let Verdict::Handshake { body } = answered else {
        panic!("not a handshake: {answered:?}");
    };
    assert!(body.contains("c-42"), "{body}");
    stack.stop().await.expect("stopped");
}
