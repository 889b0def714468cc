//! `inbound-loadgen`: signed Stripe deliveries against a running ingress, for benchmarks.
//!
//! Events (~1 KB each) are signed before the clock starts. Each connection is one
//! keep-alive HTTP/1.1 connection sending one request at a time. About `--duplicate-ratio`
//! of the requests redeliver an event already sent. Without `--rate` the load is closed
//! (as fast as answers come); with `--rate` requests are scheduled open-loop at that total
//! rate and latency is measured from the scheduled time, so a stall is not hidden
//! (no coordinated omission). With `--cpu-of PID` it also reports, over exactly the
//! timed window, the CPU that process, the loadgen itself and the whole machine used (clock
//! ticks from `/proc`): signing and freeing the events stay outside it. Prints one JSON
//! object.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use inbound_core::provider;
use inbound_core::secret::Secret;
use inbound_programs::cpu::process_ticks;
use tokio::net::TcpStream;

#[derive(Debug, Parser)]
struct Args {
    /// Ingress address, host:port.
    #[arg(long)]
    addr: String,
    /// Integration id (a Stripe integration).
    #[arg(long, default_value = "stripe-bench")]
    integration: String,
    /// The integration's Stripe secret.
    #[arg(long, env = "LOADGEN_STRIPE_SECRET", hide_env_values = true)]
    secret: String,
    /// Concurrent connections.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// How long to send.
    #[arg(long, default_value_t = 10)]
    duration_secs: u64,
    /// Total requests per second, open loop; 0 means closed loop.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Share of requests that redeliver an already sent event.
    #[arg(long, default_value_t = 0.2)]
    duplicate_ratio: f64,
    /// Events signed ahead per connection.
    #[arg(long, default_value_t = 4000)]
    events_per_connection: usize,
    /// A process (the ingress) whose CPU over the timed window is reported.
    #[arg(long)]
    cpu_of: Option<u32>,
    /// Events whose object names no id (`ref` instead of `id`, the same bytes): their
    /// receipts have no subject, so the pair of runs measures what naming one costs.
    #[arg(long)]
    without_subject: bool,
}

/// CPU clock ticks used so far (`/proc`, in USER_HZ): by the loadgen, by the watched
/// process, and by the whole machine — busy (user, nice, system, irq, softirq), taken by
/// the hypervisor (steal), and in all. `None` where `/proc` cannot say.
#[derive(Clone, Copy)]
struct CpuTicks {
    loadgen: Option<u64>,
    watched: Option<u64>,
    machine: Option<MachineTicks>,
}

#[derive(Clone, Copy)]
struct MachineTicks {
    busy: u64,
    steal: u64,
    total: u64,
}

impl CpuTicks {
    fn now(watched_pid: Option<u32>) -> Self {
        Self {
            loadgen: process_ticks("/proc/self/stat"),
            watched: watched_pid.and_then(|pid| process_ticks(&format!("/proc/{pid}/stat"))),
            machine: machine_ticks(),
        }
    }

    /// What was used between `self` and `later`, as JSON (`null` where unknown).
    fn used_until(self, later: Self, window: Duration) -> serde_json::Value {
        let between = |before: Option<u64>, after: Option<u64>| {
            before
                .zip(after)
                .map(|(before, after)| after.saturating_sub(before))
        };
        let machine = |field: fn(MachineTicks) -> u64| {
            between(self.machine.map(field), later.machine.map(field))
        };
        serde_json::json!({
            "window_secs": window.as_secs_f64(),
            "loadgen": between(self.loadgen, later.loadgen),
            "watched": between(self.watched, later.watched),
            "machine_busy": machine(|ticks| ticks.busy),
            "machine_steal": machine(|ticks| ticks.steal),
            "machine_total": machine(|ticks| ticks.total),
        })
    }
}

/// The machine's ticks so far, from `/proc/stat`.
fn machine_ticks() -> Option<MachineTicks> {
    machine_ticks_in(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The machine's line of a `/proc/stat` text: user nice system idle iowait irq softirq
/// steal (guest time is already counted in user).
fn machine_ticks_in(stat: &str) -> Option<MachineTicks> {
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let [user, nice, system, idle, iowait, irq, softirq, steal] = values.try_into().ok()?;
    Some(MachineTicks {
        busy: user + nice + system + irq + softirq,
        steal,
        total: user + nice + system + idle + iowait + irq + softirq + steal,
    })
}

struct Event {
    signature: String,
    body: Bytes,
}

#[derive(Default)]
struct Tally {
    accepted: u64,
    duplicate: u64,
    other_2xx: u64,
    unavailable: u64,
    other: u64,
    errors: u64,
    latency_us: Option<Histogram<u64>>,
}

fn sign_events(args: &Args, connection: usize) -> Vec<Event> {
    let secret = Secret::new(args.secret.as_bytes().to_vec());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64);
    let padding = "x".repeat(700);
    let run = std::process::id();
    let object_id = if args.without_subject { "ref" } else { "id" };
    (0..args.events_per_connection)
        .map(|index| {
            let body = format!(
                r#"{{"id":"evt_{run}_{connection}_{index}","object":"event","type":"payment_intent.succeeded","livemode":false,"created":{now},"data":{{"object":{{"{object_id}":"pi_{run}_{connection}_{index}","object":"payment_intent","amount_received":2000,"currency":"usd","metadata":{{"order_id":"order_{connection}_{index}","note":"{padding}"}}}}}}}}"#
            );
            Event { signature: provider::sign_stripe(&secret, now, body.as_bytes()), body: Bytes::from(body) }
        })
        .collect()
}

/// Runs one connection and hands its events back: freeing a connection's thousands of
/// events takes long enough to stall the runtime thread doing it, so the caller frees
/// them only once every connection has finished (otherwise the connections still
/// running would measure that stall as the ingress's latency).
async fn run_connection(
    args: Arc<Args>,
    connection: usize,
    events: Vec<Event>,
    start: Instant,
) -> (Tally, Vec<Event>) {
    let tally = send_until_end(&args, connection, &events, start).await;
    (tally, events)
}

/// Sends on one keep-alive connection until the run ends (or its events run out).
async fn send_until_end(args: &Args, connection: usize, events: &[Event], start: Instant) -> Tally {
    let mut tally = Tally {
        latency_us: Some(Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram")),
        ..Tally::default()
    };
    let Ok(stream) = TcpStream::connect(&args.addr).await else {
        tally.errors += 1;
        return tally;
    };
    stream.set_nodelay(true).ok();
    let Ok((mut sender, driver)) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await
    else {
        tally.errors += 1;
        return tally;
    };
    tokio::spawn(driver);
    let path = format!("/webhooks/{}", args.integration);
    let end = start + Duration::from_secs(args.duration_secs);
    let interval = (args.rate > 0)
        .then(|| Duration::from_secs_f64(args.connections as f64 / args.rate as f64));
    // Spread the open-loop schedules of the connections across one interval.
    let mut scheduled = start
        + interval.map_or(Duration::ZERO, |interval| {
            interval.mul_f64(connection as f64 / args.connections as f64)
        });
    let mut next_new = 0usize;
    let mut state = (connection as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // Nothing is sent before the clock starts, closed loop too: the rates and the CPU
    // window both run from `start`.
    tokio::time::sleep_until(start.into()).await;
    loop {
        if let Some(interval) = interval {
            tokio::time::sleep_until(scheduled.into()).await;
            scheduled += interval;
        }
        let now = Instant::now();
        if now >= end {
            break;
        }
        // xorshift: cheap, deterministic per connection.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let redeliver = next_new > 0 && (state % 10_000) as f64 / 10_000.0 < args.duplicate_ratio;
        let event = if redeliver {
            &events[(state as usize / 10_000) % next_new]
        } else if next_new < events.len() {
            next_new += 1;
            &events[next_new - 1]
        } else {
            break;
        };
        let request = hyper::Request::post(path.as_str())
            .header("host", args.addr.as_str())
            .header("content-type", "application/json")
            .header("stripe-signature", event.signature.as_str())
            .body(Full::new(event.body.clone()))
            .expect("request");
        let sent_from = if interval.is_some() {
            scheduled - interval.unwrap_or_default()
        } else {
            now
        };
        let outcome = match sender.send_request(request).await {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map(|body| body.to_bytes())
                    .unwrap_or_default();
                Some((status, body))
            }
            Err(_) => None,
        };
        let elapsed = sent_from.elapsed();
        if let Some(histogram) = tally.latency_us.as_mut() {
            histogram.saturating_record(elapsed.as_micros() as u64);
        }
        match outcome {
            Some((200, body)) if body.windows(10).any(|window| window == b"\"accepted\"") => {
                tally.accepted += 1
            }
            Some((200, body)) if body.windows(11).any(|window| window == b"\"duplicate\"") => {
                tally.duplicate += 1
            }
            Some((200..=299, _)) => tally.other_2xx += 1,
            Some((503, _)) => tally.unavailable += 1,
            Some(_) => tally.other += 1,
            None => {
                tally.errors += 1;
                break;
            }
        }
    }
    tally
}

#[tokio::main]
async fn main() {
    let args = Arc::new(Args::parse());
    let signed: Vec<Vec<Event>> = (0..args.connections)
        .map(|connection| sign_events(&args, connection))
        .collect();
    let start = Instant::now() + Duration::from_millis(100);
    let tasks: Vec<_> = signed
        .into_iter()
        .enumerate()
        .map(|(connection, events)| {
            tokio::spawn(run_connection(Arc::clone(&args), connection, events, start))
        })
        .collect();
    tokio::time::sleep_until(start.into()).await;
    let cpu_at_start = CpuTicks::now(args.cpu_of);
    let mut total = Tally {
        latency_us: Some(Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram")),
        ..Tally::default()
    };
    let mut finished_events = Vec::with_capacity(args.connections);
    for task in tasks {
        let (tally, events) = task.await.expect("connection task");
        finished_events.push(events);
        total.accepted += tally.accepted;
        total.duplicate += tally.duplicate;
        total.other_2xx += tally.other_2xx;
        total.unavailable += tally.unavailable;
        total.other += tally.other;
        total.errors += tally.errors;
        if let (Some(into), Some(from)) = (total.latency_us.as_mut(), tally.latency_us.as_ref()) {
            into.add(from).expect("same bounds");
        }
    }
    let cpu_used = cpu_at_start.used_until(CpuTicks::now(args.cpu_of), start.elapsed());
    let seconds = args.duration_secs as f64;
    let latency = total.latency_us.as_ref().expect("histogram");
    let answered =
        total.accepted + total.duplicate + total.other_2xx + total.unavailable + total.other;
    println!(
        "{}",
        serde_json::json!({
            "connections": args.connections,
            "rate_target": args.rate,
            "duration_secs": args.duration_secs,
            "requests_per_sec": answered as f64 / seconds,
            "accepted_per_sec": total.accepted as f64 / seconds,
            "accepted": total.accepted,
            "duplicate": total.duplicate,
            "other_2xx": total.other_2xx,
            "unavailable_503": total.unavailable,
            "other_status": total.other,
            "connection_errors": total.errors,
            "p50_ms": latency.value_at_quantile(0.50) as f64 / 1000.0,
            "p99_ms": latency.value_at_quantile(0.99) as f64 / 1000.0,
            "p999_ms": latency.value_at_quantile(0.999) as f64 / 1000.0,
            "max_ms": latency.max() as f64 / 1000.0,
            "cpu_ticks": cpu_used,
        })
    );
    // Only now, with every figure out, are the events freed.
    drop(finished_events);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_ticks_split_busy_steal_and_total() {
        let stat = "cpu  100 2 30 1000 7 1 4 9 50 0\ncpu0 50 1 15 500 3 0 2 4 25 0\n";
        let ticks = machine_ticks_in(stat).expect("a cpu line");
        assert_eq!(ticks.busy, 100 + 2 + 30 + 1 + 4);
        assert_eq!(ticks.steal, 9);
        assert_eq!(ticks.total, 100 + 2 + 30 + 1000 + 7 + 1 + 4 + 9);
        assert!(machine_ticks_in("cpu0 1 2 3\n").is_none());
    }
}
