//! A database that goes silent under each path that waits on it: the connections open at
//! that moment stop answering and are never closed (a failover whose old primary drops
//! packets, or a proxy that keeps acknowledging for a server that is gone), while new
//! connections reach the database. The process pauses at a failpoint with the
//! connection of that path in hand (`INBOUND_FAILPOINT_PAUSE`), the proxy strands it,
//! and the process must give the wait up within its bound and carry on through a fresh
//! connection — before, each of these waited for the kernel or for ever. The pool's own
//! check of an idle connection is tested on a pool directly.

use std::time::{Duration, Instant};

use inbound_tests::fixtures::{Provider, Variant};
use inbound_tests::{Service, Stack, eventually};

/// A server-side statement timeout of 1 s: each statement is given up 2 s after it was
/// sent; a business transaction (lease 4 s) after 4 s.
const SHORT_LIMITS: &[&str] = &["--db-statement-timeout-ms", "1000"];

/// A stack through a proxy whose worker pauses 1.5 s at `failpoint` the first time it
/// gets there, with `args` besides the short limits.
async fn worker_pausing_at(failpoint: &str, args: &[&str]) -> Stack {
    let pause = format!("{failpoint}:1500");
    let mut worker_args: Vec<String> = SHORT_LIMITS.iter().map(|arg| (*arg).to_owned()).collect();
    worker_args.extend(args.iter().map(|arg| (*arg).to_owned()));
    Stack::builder()
        .through_proxy()
        .ingress(|options| options.with_args(SHORT_LIMITS))
        .worker(move |mut options| {
            options
                .env
                .push(("INBOUND_FAILPOINT_PAUSE".to_owned(), pause));
            options.args = worker_args;
            options
        })
        .start()
        .await
}

/// Waits for `service` to say it paused at `failpoint`, then strands every connection
/// open at that moment (the one the failpoint holds among them).
async fn strand_when_paused(stack: &Stack, service: &Service, failpoint: &str) {
    let line = format!("failpoint {failpoint} paused");
    eventually(
        &format!("{failpoint} reached"),
        Duration::from_secs(20),
        async || {
            service
                .logs()
                .iter()
                .any(|logged| logged.contains(&line))
                .then_some(())
        },
    )
    .await;
    stack.proxy().strand_open();
}

/// Delivers a routed GitHub event (a `forward` to the audit sink: done as soon as a
/// worker applies it), again until the ingress — whose own connections were stranded
/// too — answers 200.
async fn deliver(stack: &Stack, event_id: &str) {
    let request = Provider::Github.request(Variant::Routed(event_id));
    eventually(
        &format!("{event_id} accepted"),
        Duration::from_secs(20),
        async || {
            let answer = stack.try_deliver(&request).await.ok()?;
            (answer.status == 200).then_some(())
        },
    )
    .await;
}

async fn receipt_status(stack: &Stack, event_id: &str) -> Option<String> {
    sqlx::query_scalar("SELECT status FROM receipts WHERE event_id = $1")
        .bind(event_id)
        .fetch_optional(stack.pool())
        .await
        .expect("status")
}

async fn wait_done(stack: &Stack, event_id: &str, limit: Duration) {
    eventually(&format!("{event_id} done"), limit, async || {
        (receipt_status(stack, event_id).await.as_deref() == Some("done")).then_some(())
    })
    .await;
}

/// When the worker's gauges were last refreshed, as its metrics say (0 before the first).
async fn gauges_refreshed_at(stack: &Stack) -> Option<f64> {
    let metrics = stack
        .client
        .get(&stack.worker().metrics_url("/metrics"))
        .await
        .ok()?;
    String::from_utf8_lossy(&metrics.body)
        .lines()
        .find_map(|line| line.strip_prefix("inbound_gauges_refreshed_timestamp_seconds "))?
        .trim()
        .parse()
        .ok()
}

fn gave_up_on_the_database(service: &Service) -> bool {
    service
        .logs()
        .iter()
        .any(|line| line.contains("the database did not answer within"))
}

/// The claim statement goes out on a connection that has gone silent: it is given up
/// after the statement limit, and the next claim (a fresh connection) takes the receipt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_on_a_silent_connection_is_given_up_and_claimed_again() {
    let stack = worker_pausing_at("before_claim", &["--poll-interval-ms", "100"]).await;
    strand_when_paused(&stack, stack.worker(), "before_claim").await;
    deliver(&stack, "gh_after_claim_stranded").await;
    wait_done(&stack, "gh_after_claim_stranded", Duration::from_secs(15)).await;
    assert!(
        gave_up_on_the_database(stack.worker()),
        "{:#?}",
        stack.worker().logs()
    );
}

/// A business transaction whose connection goes silent after its fence: given up after
/// the lease — freeing the worker's only slot —, the receipt claimed again once the
/// server ended the silent session (`idle_in_transaction_session_timeout`, which frees its
/// lock on the queue row) and applied once, by a fresh connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_business_transaction_on_a_silent_connection_is_given_up_within_its_lease() {
    let stack = worker_pausing_at(
        "worker_in_business_tx",
        &["--lease-secs", "4", "--concurrency", "1"],
    )
    .await;
    deliver(&stack, "gh_in_business_tx").await;
    let started = Instant::now();
    strand_when_paused(&stack, stack.worker(), "worker_in_business_tx").await;
    wait_done(&stack, "gh_in_business_tx", Duration::from_secs(20)).await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let effects: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM effects e JOIN receipts r ON r.id = e.receipt_id WHERE r.event_id = $1",
    )
    .bind("gh_in_business_tx")
    .fetch_one(stack.pool())
    .await
    .expect("effects");
    assert_eq!(effects, 1, "applied once");
}

/// The recorder's statement for a delivery outcome goes out on its silent connection: it
/// is given up after the statement limit and written through a fresh one well before the
/// in-flight lease ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_outcome_on_a_silent_connection_is_recorded_through_a_fresh_one() {
    let stack = worker_pausing_at("before_recording", &["--lease-secs", "30"]).await;
    deliver(&stack, "gh_recorded").await;
    strand_when_paused(&stack, stack.worker(), "before_recording").await;
    let started = Instant::now();
    // The audit sink (port 9) refuses connections: the first attempt ends in a retry,
    // recorded with its error.
    eventually(
        "the first attempt recorded",
        Duration::from_secs(15),
        async || {
            let recorded: Option<i64> = sqlx::query_scalar(
                "SELECT count(*) FROM effect_attempts a JOIN effects e ON e.id = a.effect_id
             JOIN receipts r ON r.id = e.receipt_id
             WHERE r.event_id = 'gh_recorded' AND a.finished_at IS NOT NULL",
            )
            .fetch_optional(stack.pool())
            .await
            .ok()
            .flatten();
            recorded.filter(|count| *count >= 1)
        },
    )
    .await;
    // Waiting for its silent statement until the kernel gave up, or until the lease
    // ended and another claim judged the attempt, would take 30 s and more.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "recorded before the 30 s lease ends: {:?}",
        started.elapsed()
    );
}

/// The gauges' refresh goes out on a silent connection: it is given up, and the next
/// refresh brings the gauges up to date again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gauge_refresh_on_a_silent_connection_is_given_up_and_the_next_one_runs() {
    let stack = worker_pausing_at("before_gauges", &["--gauge-interval-secs", "1"]).await;
    strand_when_paused(&stack, stack.worker(), "before_gauges").await;
    let stranded_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    eventually(
        "the gauges refreshed again",
        Duration::from_secs(15),
        async || {
            let refreshed = gauges_refreshed_at(&stack).await?;
            (refreshed > stranded_at).then_some(())
        },
    )
    .await;
    assert!(
        stack
            .worker()
            .logs()
            .iter()
            .any(|line| line.contains("could not refresh the queue gauges")),
        "{:#?}",
        stack.worker().logs()
    );
}

/// The start-up session check's sessions go silent once connected: the check is given
/// up and tried again on new sessions; until it passes, the ingress says it is not ready
/// (it could commit nothing), and then it serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_check_on_silent_sessions_is_tried_again_and_readiness_waits_for_it() {
    let stack = Stack::builder()
        .through_proxy()
        .ingress(|mut options| {
            options.env.push((
                "INBOUND_FAILPOINT_PAUSE".to_owned(),
                "session_check_connected:1500".to_owned(),
            ));
            options.with_args(SHORT_LIMITS)
        })
        .start()
        .await;
    strand_when_paused(&stack, &stack.ingress, "session_check_connected").await;
    let readyz = stack.ingress.url("/readyz");
    let not_ready = stack.client.get(&readyz).await.expect("answer").status;
    assert_eq!(not_ready, 503, "not ready while the check hangs");
    eventually(
        "ready once the check passed",
        Duration::from_secs(20),
        async || {
            let answer = stack.client.get(&readyz).await.ok()?;
            (answer.status == 200).then_some(())
        },
    )
    .await;
    assert_eq!(stack.deliver_event("evt_after_check").await.status, 200);
    assert!(
        stack
            .ingress
            .logs()
            .iter()
            .any(|line| line.contains("cannot check the database sessions yet")),
        "{:#?}",
        stack.ingress.logs()
    );
}

/// A worker whose claim hangs on a silent connection still drains on SIGTERM within its
/// grace period: the claim is given up, the loop sees the stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_waiting_on_a_silent_claim_still_stops_on_sigterm() {
    let mut stack = worker_pausing_at("before_claim", &["--shutdown-grace-secs", "3"]).await;
    strand_when_paused(&stack, stack.worker(), "before_claim").await;
    let worker = stack.worker.as_mut().expect("a worker");
    worker.terminate();
    let started = Instant::now();
    let status = worker
        .wait_exit(Duration::from_secs(15))
        .expect("the worker exited");
    assert!(status.success(), "{status}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// Every connection a process opens to the database carries TCP keepalive (and, on
/// Linux, a TCP user timeout): a server that vanished is noticed by the kernel in about
/// half a minute rather than hours. `ss` shows the keepalive timer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_connections_carry_tcp_keepalive() {
    let stack = Stack::builder().worker(|options| options).start().await;
    assert_eq!(stack.deliver_event("evt_keepalive").await.status, 200);
    for (name, pid) in [
        ("ingress", stack.ingress.pid()),
        ("worker", stack.worker().pid()),
    ] {
        let sockets = eventually(
            &format!("{name}'s connections"),
            Duration::from_secs(10),
            async || {
                let output = std::process::Command::new("ss")
                    .args(["-tonp", "state", "established"])
                    .output()
                    .ok()?;
                let text = String::from_utf8_lossy(&output.stdout).into_owned();
                let own: Vec<String> = text
                    .lines()
                    .filter(|line| line.contains(&format!("pid={pid},")))
                    .map(str::to_owned)
                    .collect();
                (!own.is_empty()).then_some(own)
            },
        )
        .await;
        let _ = sockets;
    }
}

/// `inboundctl` whose session goes silent once connected gives up after its statement
/// timeout and a margin, saying so and how to allow more, instead of hanging a terminal
/// or a CronJob until the kernel gives up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inboundctl_on_a_silent_session_gives_up_and_says_so() {
    let database = inbound_tests::TestDatabase::create().await;
    let proxy =
        inbound_tests::proxy::DbProxy::start(inbound_tests::proxy::database_addr(database.url()))
            .await;
    let mut child = inbound_tests::ctl::Inboundctl::new()
        .database(&proxy.rewrite_url(database.url()))
        .envs(&[("INBOUND_FAILPOINT_PAUSE", "ctl_connected:1500")])
        .command(&["status", "--statement-timeout-secs", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run inboundctl");
    let stderr = inbound_tests::process::capture_lines(child.stderr.take().expect("stderr"));
    eventually(
        "inboundctl connected",
        Duration::from_secs(20),
        async || {
            let lines = stderr.lock().expect("lines");
            lines
                .iter()
                .any(|line| line.contains("failpoint ctl_connected paused"))
                .then_some(())
        },
    )
    .await;
    proxy.strand_open();
    let started = Instant::now();
    let status = eventually("inboundctl exited", Duration::from_secs(15), async || {
        child.try_wait().ok().flatten()
    })
    .await;
    assert_eq!(status.code(), Some(1));
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    eventually("the reason printed", Duration::from_secs(2), async || {
        let lines = stderr.lock().expect("lines");
        lines
            .iter()
            .any(|line| {
                line.contains("gave up on the database")
                    && line.contains("did not answer within 2000 ms")
            })
            .then_some(())
    })
    .await;
}

/// The worker's gauges query the database like everything else: not before its sessions
/// are checked (an undeclared pooler would carry their statements). While the check is
/// held up, the gauges stay at their initial values, never refreshed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_refreshes_no_gauge_before_its_sessions_are_checked() {
    let stack = Stack::builder()
        .worker(|mut options| {
            options.env.push((
                "INBOUND_FAILPOINT_PAUSE".to_owned(),
                "session_check_connected:4000".to_owned(),
            ));
            options.with_args(&["--gauge-interval-secs", "1"])
        })
        .start()
        .await;
    let refreshed_at = async || gauges_refreshed_at(&stack).await;
    // Two refresh intervals while the check is still paused.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        stack
            .worker()
            .logs()
            .iter()
            .any(|line| line.contains("failpoint session_check_connected paused")),
        "the check is held up"
    );
    assert_eq!(
        refreshed_at().await,
        Some(0.0),
        "no refresh before the check"
    );
    eventually(
        "refreshed after the check",
        Duration::from_secs(15),
        async || refreshed_at().await.filter(|at| *at > 0.0),
    )
    .await;
}

/// A pool checks an idle connection with a round trip before it hands it out. When the
/// server behind idle connections vanished without a word, that check is given up after
/// the statement margin, the connection dropped, and a fresh one opened within the same
/// acquisition — before, the check waited out the whole acquire timeout (a 503 at the
/// ingress, a claim skipped at the worker) once for each idle connection stranded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_gone_silent_fails_its_check_and_a_fresh_one_is_opened() {
    let database = inbound_tests::TestDatabase::create().await;
    let proxy =
        inbound_tests::proxy::DbProxy::start(inbound_tests::proxy::database_addr(database.url()))
            .await;
    let acquire_timeout = Duration::from_secs(4);
    let pool = inbound_store::connect_pool_lazy(
        &proxy.rewrite_url(database.url()),
        &inbound_store::PoolSettings {
            max_connections: 4,
            acquire_timeout,
            statement_timeout: Duration::from_secs(1),
            application_name: "silent-idle-test".to_owned(),
            target: inbound_store::SessionTarget {
                schema: inbound_store::Schema::default(),
                pooler: inbound_store::Pooler::None,
            },
        },
    )
    .expect("pool");
    // Two connections opened and handed back: both idle in the pool.
    let (first, second) = (
        pool.acquire().await.expect("first"),
        pool.acquire().await.expect("second"),
    );
    drop((first, second));
    eventually("both idle", Duration::from_secs(5), async || {
        (pool.num_idle() == 2).then_some(())
    })
    .await;
    proxy.strand_open();

    let mut held = Vec::new();
    for round in ["one stranded connection", "the other"] {
        let started = Instant::now();
        let mut connection = pool
            .acquire()
            .await
            .unwrap_or_else(|error| panic!("{round}: {error} after {:?}", started.elapsed()));
        let answer: i32 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&mut *connection)
            .await
            .expect("a fresh connection answers");
        assert_eq!(answer, 1);
        assert!(
            started.elapsed() < acquire_timeout / 2,
            "{round}: {:?}",
            started.elapsed()
        );
        // Held until both rounds are done, so that the second takes the other stranded
        // connection rather than this fresh one.
        held.push(connection);
    }
}
