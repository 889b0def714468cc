//! Crash points for the crash-table fixtures. With the `failpoints` feature, a process
//! started with `INBOUND_FAILPOINT=<name>` aborts (no destructors, no flush: as abrupt as
//! SIGKILL) when it reaches that point, and one started with
//! `INBOUND_FAILPOINT_PAUSE=<name>:<millis>` waits there that long the first time it
//! reaches it (logging `failpoint <name> paused`): a fixture then silences the database
//! under the statement that follows. Release builds never enable the feature, and then
//! [`hit`] and [`pause`] compile to nothing.

/// Stops the process here if the named failpoint is armed.
#[inline]
pub fn hit(name: &str) {
    #[cfg(feature = "failpoints")]
    if std::env::var("INBOUND_FAILPOINT").is_ok_and(|armed| armed == name) {
        eprintln!("failpoint {name} hit: aborting");
        std::process::abort();
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}

/// Waits here, once per process, if `INBOUND_FAILPOINT_PAUSE` names this point.
pub async fn pause(name: &str) {
    #[cfg(feature = "failpoints")]
    {
        use std::sync::atomic::{AtomicBool, Ordering};
        static PAUSED: AtomicBool = AtomicBool::new(false);
        let armed = std::env::var("INBOUND_FAILPOINT_PAUSE").unwrap_or_default();
        if let Some((point, millis)) = armed.split_once(':')
            && point == name
            && let Ok(millis) = millis.parse::<u64>()
            && !PAUSED.swap(true, Ordering::SeqCst)
        {
            eprintln!("failpoint {name} paused for {millis} ms");
            tokio::time::sleep(std::time::Duration::from_millis(millis)).await;
        }
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}
