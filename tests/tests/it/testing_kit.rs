//! The testing kit a team's handler tests use (`inbound_worker::testing`), held to what its
//! documentation says: `send` names a handshake as one, `drain` waits only for what the
//! stack's worker claims, and `outcome` refuses an event id several receipts hold
//! (`receipt_outcome` takes the receipt `send` answered with).

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
    let mut shared_in_a = None;
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
        let Verdict::Accepted { receipt_id } = verdict else {
            panic!("{integration} {event_id}: {verdict:?}");
        };
        if (integration, event_id) == ("stripe-a", "evt_shared") {
            shared_in_a = Some(receipt_id);
        }
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
        ambiguous.to_string().contains("held by several receipts (")
            && ambiguous.to_string().contains("of stripe-a")
            && ambiguous.to_string().contains("of stripe-b"),
        "{ambiguous}"
    );
    // The receipt `send` answered with says which is meant.
    let shared = stack
        .receipt_outcome(
            shared_in_a.expect("stripe-a's receipt"),
            Duration::from_secs(1),
        )
        .await
        .expect("stripe-a's receipt finished");
    assert_eq!(shared.status, ReceiptStatus::Done);
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
