//! PgBouncer from Debian's package, in `pool_mode = transaction`, in front of the test
//! server: a private instance on a free loopback port that a test may restart mid-load.
//!
//! PgBouncer refuses to run as root, so under root it runs as the `postgres` user. It
//! forwards every database and lets in the users it is given (trust), logging in to the
//! server with the password `DATABASE_URL` carries, if any. `INBOUND_PGBOUNCER` overrides
//! the binary (default `/usr/sbin/pgbouncer`, else `pgbouncer` on the PATH).

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::{path_text, postgres_user_ids};
use crate::process::ScratchDir;
use crate::proxy::{database_addr, url_at};

/// What the pooler lets through besides a transaction pooler's defaults.
#[derive(Debug, Clone, Default)]
pub struct PoolerOptions {
    /// `ignore_startup_parameters`: PgBouncer refuses a connection sending any other
    /// startup parameter it does not track (e.g. `options`) unless it is named here.
    pub ignore_startup_parameters: Vec<String>,
    /// Users (and passwords) allowed in besides the one of `DATABASE_URL`.
    pub users: Vec<(String, String)>,
}

/// A running PgBouncer; stopped on drop.
pub struct PgBouncer {
    scratch: ScratchDir,
    port: u16,
    child: Option<Child>,
}

impl PgBouncer {
    /// Starts PgBouncer in transaction mode in front of `admin_url`'s server.
    pub fn start(admin_url: &str, options: &PoolerOptions) -> Self {
        let scratch = ScratchDir::new();
        let port = crate::ports::free_port();
        let server = database_addr(admin_url);
        let parsed: sqlx::postgres::PgConnectOptions = admin_url.parse().expect("URL parses");
        let admin_user = parsed.get_username().to_owned();
        let password = password_of(admin_url);
        let mut users = vec![format!("\"{admin_user}\" \"{password}\"")];
        users.extend(
            options
                .users
                .iter()
                .map(|(user, password)| format!("\"{user}\" \"{password}\"")),
        );
        std::fs::write(scratch.path().join("users.txt"), users.join("\n") + "\n")
            .expect("write users.txt");
        let directory = path_text(scratch.path());
        let config = format!(
            "[databases]\n\
             * = host={host} port={server_port}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {directory}/users.txt\n\
             pool_mode = transaction\n\
             max_client_conn = 1000\n\
             default_pool_size = 20\n\
             server_reset_query =\n\
             ignore_startup_parameters = {ignored}\n\
             logfile = {directory}/pgbouncer.log\n",
            host = server.ip(),
            server_port = server.port(),
            ignored = options.ignore_startup_parameters.join(","),
        );
        std::fs::write(scratch.path().join("pgbouncer.ini"), config).expect("write config");
        if let Some((uid, gid)) = postgres_user_ids() {
            std::process::Command::new("chown")
                .args(["-R", &format!("{uid}:{gid}"), &directory])
                .status()
                .expect("chown");
        }
        let mut pooler = Self {
            scratch,
            port,
            child: None,
        };
        pooler.start_process();
        pooler
    }

    /// `database_url` with its host and port replaced by the pooler's.
    pub fn rewrite_url(&self, database_url: &str) -> String {
        url_at(database_url, self.addr())
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Kills the pooler (every client and server connection drops) and starts it again
    /// on the same port.
    pub fn restart(&mut self) {
        self.stop();
        self.start_process();
    }

    /// The pooler's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.scratch.path().join("pgbouncer.log")).unwrap_or_default()
    }

    fn start_process(&mut self) {
        let config = path_text(&self.scratch.path().join("pgbouncer.ini"));
        let mut command = Command::new(binary());
        command
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some((uid, gid)) = postgres_user_ids() {
            command.uid(uid).gid(gid);
        }
        self.child = Some(command.spawn().expect("start pgbouncer"));
        let started = Instant::now();
        while std::net::TcpStream::connect(self.addr()).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "pgbouncer did not listen: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().ok();
            child.wait().ok();
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("INBOUND_PGBOUNCER") {
        return PathBuf::from(path);
    }
    let debian = PathBuf::from("/usr/sbin/pgbouncer");
    if debian.exists() {
        debian
    } else {
        PathBuf::from("pgbouncer")
    }
}

/// The URL's password, percent-decoding left to the server (tests use plain ones).
fn password_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    authority
        .rsplit_once('@')
        .and_then(|(userinfo, _)| userinfo.split_once(':'))
        .map(|(_, password)| password.to_owned())
        .unwrap_or_default()
}
