//! A private PostgreSQL server of our own (initdb into a scratch directory, on a free
//! loopback port) for tests that stop and restart the server itself: doing that to the
//! shared server would break every other test running in parallel. A second one can
//! stream from it as a standby (`pg_basebackup -R`) and be promoted: a failover.
//!
//! The server binaries come from `INBOUND_PG_BINDIR`, else `pg_config --bindir`, else the
//! newest `/usr/lib/postgresql/*/bin`. PostgreSQL refuses to run as root, so under root
//! every server command runs as the `postgres` user (`runuser`), which owns the directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::process::ScratchDir;

/// A running private server; stopped (immediately) and removed on drop.
pub struct PrivateCluster {
    scratch: ScratchDir,
    bindir: PathBuf,
    port: u16,
    as_postgres_user: bool,
}

impl PrivateCluster {
    /// Creates a cluster with trust authentication and starts it.
    pub fn start() -> Self {
        let cluster = Self::initialized();
        cluster.start_server();
        cluster
    }

    /// A cluster with trust authentication, not started.
    fn initialized() -> Self {
        let cluster = Self::unstarted();
        cluster.server_command(
            "initdb",
            &[
                "-D",
                &cluster.data_dir(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                // The server's messages in English, whatever the machine's locale: a
                // failed start is explained by its log (and a test reads it).
                "--lc-messages=C",
                "--no-sync",
            ],
        );
        cluster
    }

    /// A scratch directory owned by the server's user and a free port; no server yet.
    fn unstarted() -> Self {
        let scratch = ScratchDir::new();
        let as_postgres_user = running_as_root();
        if as_postgres_user {
            run(Command::new("chown").args(["postgres:", &path_text(scratch.path())]));
        }
        let port = crate::ports::free_port();
        Self {
            scratch,
            bindir: server_bindir(),
            port,
            as_postgres_user,
        }
    }

    /// A standby of a primary, streaming from it (`pg_basebackup -R`, which trust
    /// authentication allows for replication from 127.0.0.1), started. It is asynchronous
    /// until the primary names it in `synchronous_standby_names`
    /// ([`PrivateCluster::require_synchronous_standby`]); taken after the base backup, so
    /// that the standby does not inherit the setting and, once promoted, waits for no one.
    /// `via` is where the standby reaches the primary (its address, or a proxy in front
    /// of it that a test can stall: replication lag on demand).
    pub fn standby_of(via: std::net::SocketAddr) -> Self {
        let standby = Self::unstarted();
        standby.server_command(
            "pg_basebackup",
            &[
                "-d",
                &format!("host={} port={} user=postgres", via.ip(), via.port()),
                "-D",
                &standby.data_dir(),
                "-R",
                "-X",
                "stream",
                "--no-sync",
            ],
        );
        standby.start_server();
        standby
    }

    /// Commits wait for a standby to confirm it flushed them (`synchronous_standby_names
    /// = '*'`, reloaded); waits until one is streaming as synchronous.
    pub fn require_synchronous_standby(&self) {
        self.psql("ALTER SYSTEM SET synchronous_standby_names = '*'");
        self.psql("SELECT pg_reload_conf()");
        self.wait_for_standby("sync");
    }

    /// Waits until a standby streams from this server with `sync_state` (`async`, `sync`).
    pub fn wait_for_standby(&self, sync_state: &str) {
        let started = std::time::Instant::now();
        loop {
            let streaming = self.psql(&format!(
                "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = '{sync_state}'"
            ));
            if streaming.trim() != "0" {
                return;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "no {sync_state} standby streaming"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Promotes this standby to a primary and waits until it accepts writes.
    pub fn promote(&self) {
        self.server_command("pg_ctl", &["-D", &self.data_dir(), "-w", "promote"]);
    }

    /// Where the server listens.
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Runs one statement through `psql` and returns what it printed (unaligned).
    fn psql(&self, statement: &str) -> String {
        let output = self
            .server_program("psql")
            .args([
                "-X",
                "-At",
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-c",
                statement,
            ])
            .current_dir(self.scratch.path())
            .output()
            .expect("run psql");
        assert!(
            output.status.success(),
            "psql {statement}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `postgres://postgres@127.0.0.1:{port}/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the server the way a crash does: no checkpoint, every connection cut; the
    /// next start replays the WAL.
    pub fn crash(&self) {
        self.server_command(
            "pg_ctl",
            &["-D", &self.data_dir(), "-m", "immediate", "-w", "stop"],
        );
    }

    /// Starts the stopped server again on the same port.
    pub fn start_server(&self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c max_connections=200",
            self.port,
            path_text(self.scratch.path())
        );
        let log_path = self.scratch.path().join("server.log");
        let log = path_text(&log_path);
        // pg_ctl only says "Examine the log output": the cause is in the log, so a failed
        // start carries its end.
        run_explained(
            self.server_program("pg_ctl")
                .args([
                    "-D",
                    &self.data_dir(),
                    "-o",
                    &options,
                    "-l",
                    &log,
                    "-t",
                    "60",
                    "-w",
                    "start",
                ])
                .current_dir(self.scratch.path()),
            || {
                let text = std::fs::read_to_string(&log_path)
                    .unwrap_or_else(|error| format!("(unreadable: {error})"));
                let tail_start = text.floor_char_boundary(text.len().saturating_sub(4_000));
                format!("\nend of {log}:\n{}", &text[tail_start..])
            },
        );
    }

    fn data_dir(&self) -> String {
        path_text(&self.scratch.path().join("data"))
    }

    /// Runs a server program from `bindir` and insists it succeeds.
    fn server_command(&self, program: &str, args: &[&str]) {
        run(self
            .server_program(program)
            .args(args)
            .current_dir(self.scratch.path()));
    }

    /// A server program from `bindir`, run as `postgres` when we are root.
    fn server_program(&self, program: &str) -> Command {
        let program = path_text(&self.bindir.join(program));
        if self.as_postgres_user {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--", &program]);
            command
        } else {
            Command::new(&program)
        }
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let data = self.data_dir();
        self.server_program("pg_ctl")
            .args(["-D", &data, "-m", "immediate", "-w", "stop"])
            .output()
            .ok();
    }
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// The `postgres` user's uid and gid when we run as root (server programs refuse root),
/// `None` otherwise.
pub fn postgres_user_ids() -> Option<(u32, u32)> {
    if !running_as_root() {
        return None;
    }
    let id = |flag: &str| -> u32 {
        let output = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .expect("id postgres");
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .expect("a numeric id")
    };
    Some((id("-u"), id("-g")))
}

fn server_bindir() -> PathBuf {
    if let Some(directory) = std::env::var_os("INBOUND_PG_BINDIR") {
        return PathBuf::from(directory);
    }
    let from_pg_config = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
        .filter(|directory| directory.join("initdb").exists());
    from_pg_config.unwrap_or_else(|| {
        let mut candidates: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let version = entry.file_name().to_string_lossy().parse().ok()?;
                let bin = entry.path().join("bin");
                bin.join("initdb").exists().then_some((version, bin))
            })
            .collect();
        candidates.sort();
        candidates
            .pop()
            .map(|(_, bin)| bin)
            .expect("PostgreSQL server binaries (initdb, pg_ctl): set INBOUND_PG_BINDIR")
    })
}

/// A path as text for a command line.
pub fn path_text(path: &Path) -> String {
    path.display().to_string()
}

fn run(command: &mut Command) {
    run_explained(command, String::new);
}

/// Runs a command and insists it succeeds; a failure says what `explain` adds.
fn run_explained(command: &mut Command, explain: impl FnOnce() -> String) {
    let output = command.output().expect("run a PostgreSQL command");
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        explain()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pg_ctl's own message names no cause; the log's end does.
    #[test]
    fn a_start_that_fails_says_why() {
        let cluster = PrivateCluster::initialized();
        let _occupant = std::net::TcpListener::bind(cluster.addr()).expect("take the port");
        let failure = std::panic::catch_unwind(|| cluster.start_server())
            .expect_err("the port is taken, so the server cannot start");
        let message = failure
            .downcast_ref::<String>()
            .expect("a formatted panic message");
        assert!(
            message.contains("could not bind") && message.contains("Address already in use"),
            "{message}"
        );
    }
}
