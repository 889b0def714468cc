//! Where a request's signature is checked. Core's verifiers bound the work of one request
//! ([`verify::worst_case_cost`]: a MAC pass per secret, at most four Ed25519 checks), but
//! a 1 MiB body under several keys is still milliseconds of hashing. A request whose worst
//! case is at most [`verify::INLINE_COST_LIMIT`] is checked where it is handled; a larger
//! one runs on tokio's blocking threads, at most [`Verification::concurrency`] at once, so
//! forged requests can neither hold the async threads that read every other integration's
//! bodies and answer them, nor take more than that share of the CPU. A request that waits
//! longer than [`PERMIT_WAIT`] for a turn is answered 503 `overloaded` (the sender retries).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use inbound_core::config::{Config, Integration};
use inbound_core::headers::Headers;
use inbound_core::provider;
use inbound_core::verify::{self, VerifyContext, VerifyError};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::body::HeldBody;

/// The longest a request waits for a turn on the verification threads.
pub const PERMIT_WAIT: Duration = Duration::from_secs(1);

/// Why a request was not verified.
#[derive(Debug)]
pub enum Unverified {
    /// The verifier refused it (401).
    Refused(VerifyError),
    /// Every verification thread stayed busy for [`PERMIT_WAIT`] (503).
    Busy,
}

/// The verification threads' turns, and the configuration their checks read.
pub struct Verification {
    config: Arc<Config>,
    turns: Arc<Semaphore>,
    /// Checks run on the verification threads so far.
    offloaded: AtomicU64,
}

impl Verification {
    /// Expensive verifications `concurrency` at a time (at least one).
    pub fn new(config: Arc<Config>, concurrency: usize) -> Self {
        let concurrency = concurrency.max(1);
        Self {
            config,
            turns: Arc::new(Semaphore::new(concurrency)),
            offloaded: AtomicU64::new(0),
        }
    }

    /// Half the machine's cores (at least one): the rest stays with reading, committing
    /// and answering.
    pub fn default_concurrency() -> usize {
        std::thread::available_parallelism().map_or(1, |cores| cores.get() / 2)
    }

    /// How many checks ran on the verification threads so far.
    #[cfg(test)]
    pub fn offloaded(&self) -> u64 {
        self.offloaded.load(Ordering::Relaxed)
    }

    /// Verifies `body` as sent with `headers` to `integration` at `now_unix_secs`.
    pub async fn verify(
        &self,
        integration: &Integration,
        headers: &http::HeaderMap,
        body: &Arc<HeldBody>,
        now_unix_secs: i64,
        deadline: Instant,
    ) -> Result<(), Unverified> {
        // What is signed is the body and at most a head's worth of header parts (an id,
        // a timestamp, a template's literals).
        let cost = verify::worst_case_cost(
            integration.provider,
            integration.custom.as_ref().map(|custom| &custom.verifier),
            integration.secrets.len(),
            integration.public_keys.len(),
            body.bytes().len() + inbound_runtime::server::MAX_REQUEST_HEAD_BYTES,
        );
        if cost <= verify::INLINE_COST_LIMIT {
            return check(integration, headers, body.bytes(), now_unix_secs)
                .map_err(Unverified::Refused);
        }
        let wait_until = deadline.min(Instant::now() + PERMIT_WAIT);
        let turn = tokio::time::timeout_at(wait_until, Arc::clone(&self.turns).acquire_owned())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or(Unverified::Busy)?;
        self.offloaded.fetch_add(1, Ordering::Relaxed);
        let config = Arc::clone(&self.config);
        let integration_id = integration.id.clone();
        let headers = headers.clone();
        let body = Arc::clone(body);
        let checked = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            // The id came from this configuration, which never changes while it runs.
            let integration = config
                .integration(&integration_id)
                .ok_or(VerifyError::NoMatchingSignature)?;
            check(integration, &headers, body.bytes(), now_unix_secs)
        })
        .await;
        match checked {
            Ok(verdict) => verdict.map_err(Unverified::Refused),
            // A verifier that panicked verified nothing.
            Err(error) => {
                tracing::error!(%error, integration = %integration.id, "signature verification panicked");
                Err(Unverified::Refused(VerifyError::NoMatchingSignature))
            }
        }
    }
}

/// The check itself, on whichever thread runs it.
fn check(
    integration: &Integration,
    headers: &http::HeaderMap,
    body: &[u8],
    now_unix_secs: i64,
) -> Result<(), VerifyError> {
    let headers: Headers = headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
        .collect();
    let context = VerifyContext {
        secrets: &integration.secrets,
        public_keys: &integration.public_keys,
        tolerance_secs: integration.tolerance_secs,
        now_unix_secs,
    };
    let scheme = integration.custom.as_ref().map(|custom| &custom.verifier);
    provider::verify_with(integration.provider, scheme, &headers, body, context)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use inbound_core::secret::Secret;

    const CONFIG: &str = r#"
[[integration]]
id = "std"
provider = "standard"
tenant = "t"
secrets = ["env:WHSEC", "env:WHPK"]

[[integration]]
id = "stripe"
provider = "stripe"
tenant = "t"
secrets = ["env:STRIPE"]
"#;

    /// A Standard Webhooks check of a large body under a public key costs more than the
    /// inline limit: it runs on the verification threads, and verifies there; a small
    /// Stripe check stays where it is.
    #[tokio::test]
    async fn a_costly_check_runs_on_the_verification_threads_and_a_cheap_one_inline() {
        let config = Config::from_toml(CONFIG, &|name| {
            Some(
                match name {
                    "WHSEC" => "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                    // RFC 8032's first test key.
                    "WHPK" => "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
                    _ => "stripe-secret",
                }
                .to_owned(),
            )
        })
        .expect("config");
        let config = Arc::new(config);
        let verification = Verification::new(Arc::clone(&config), 1);
        let now = 1_700_000_000;
        let deadline = Instant::now() + Duration::from_secs(10);

        let standard = config.integration("std").expect("std");
        let large = Bytes::from(format!(r#"{{"pad":"{}"}}"#, "x".repeat(600 * 1024)));
        let signature = provider::sign_standard(&standard.secrets[0], "msg_1", now, &large);
        let headers: http::HeaderMap = [
            ("webhook-id", "msg_1".to_owned()),
            ("webhook-timestamp", now.to_string()),
            ("webhook-signature", signature),
        ]
        .into_iter()
        .map(|(name, value)| {
            (
                http::HeaderName::from_static(name),
                http::HeaderValue::from_str(&value).expect("header"),
            )
        })
        .collect();
        let body = Arc::new(HeldBody::unbudgeted(large));
        assert!(
            verification
                .verify(standard, &headers, &body, now, deadline)
                .await
                .is_ok()
        );
        assert_eq!(verification.offloaded(), 1);

        let stripe = config.integration("stripe").expect("stripe");
        let small = Bytes::from_static(br#"{"id":"evt_1"}"#);
        let signed = provider::sign_stripe(&Secret::new(b"stripe-secret".to_vec()), now, &small);
        let headers: http::HeaderMap = [(
            http::HeaderName::from_static("stripe-signature"),
            http::HeaderValue::from_str(&signed).expect("header"),
        )]
        .into_iter()
        .collect();
        let body = Arc::new(HeldBody::unbudgeted(small));
        assert!(
            verification
                .verify(stripe, &headers, &body, now, deadline)
                .await
                .is_ok()
        );
        assert_eq!(verification.offloaded(), 1, "the small check stayed inline");
    }
}
