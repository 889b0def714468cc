//! Crash points for the crash-table fixtures. With the `failpoints` feature, a process
//! started with `INBOUND_FAILPOINT=<name>` aborts (no destructors, no flush: as abrupt as
//! SIGKILL) when it reaches that point. Release builds never enable the feature, and then
//! [`hit`] compiles to nothing.

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
