//! The real binaries as child processes: started with a config file and a database URL,
//! their JSON log lines captured, stopped with SIGKILL or SIGTERM.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the workspace's binaries are.
pub fn binary(name: &str) -> PathBuf {
    let directory = std::env::var_os("INBOUND_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(|| workspace.join("target"), PathBuf::from);
            target.join("debug")
        });
    let path = directory.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the binaries first (`make test` runs `cargo build --workspace --bins --features inbound-runtime/failpoints`)",
        path.display()
    );
    path
}

/// A scratch directory removed on drop.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// Creates a new, empty directory under the system temp dir. Its path holds no
    /// whitespace (suites pass paths as words of a command line, `ctl::words`): a temp
    /// dir with a space in its path is refused here, by name.
    pub fn new() -> Self {
        let temp = std::env::temp_dir();
        assert!(
            !temp.to_string_lossy().contains(char::is_whitespace),
            "the temp dir {} holds whitespace: set TMPDIR to a path without",
            temp.display()
        );
        let path = temp.join(format!(
            "inbound-test-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&path).expect("create scratch dir");
        Self(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Default for ScratchDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// How to start a service binary.
#[derive(Debug, Clone, Default)]
pub struct ServiceOptions {
    /// The TOML configuration; `{scratch}` stands for the process's scratch directory.
    pub config_toml: String,
    /// Files (name, contents) written into the scratch directory before start.
    pub files: Vec<(String, String)>,
    /// The database URL.
    pub database_url: String,
    /// Extra environment (secrets referenced by `env:`, `INBOUND_FAILPOINT`, …).
    pub env: Vec<(String, String)>,
    /// Extra command-line flags.
    pub args: Vec<String>,
}

impl ServiceOptions {
    /// These options with `args` as the extra command-line flags (replacing any given
    /// before).
    pub fn with_args(mut self, args: &[&str]) -> Self {
        self.args = args.iter().map(|arg| (*arg).to_owned()).collect();
        self
    }
}

/// Which binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `inbound-ingress`.
    Ingress,
    /// `inbound-worker`.
    Worker,
}

/// A running `inbound-ingress` or `inbound-worker`.
pub struct Service {
    child: Child,
    /// Webhook address (the ingress); the metrics address for a worker.
    pub addr: SocketAddr,
    /// Metrics address.
    pub metrics_addr: SocketAddr,
    logs: Arc<Mutex<Vec<String>>>,
    /// The thread reading `logs`: it ends at the end of the process's stderr.
    log_reader: std::thread::JoinHandle<()>,
    _scratch: ScratchDir,
}

/// Variables of ours that must not leak from the test runner into a child.
const INHERITED_TO_REMOVE: &[&str] = &[
    "DATABASE_URL",
    "INBOUND_CONFIG",
    "INBOUND_LISTEN",
    "INBOUND_METRICS_LISTEN",
    "INBOUND_FAILPOINT",
    "INBOUND_LOG_FORMAT",
];

impl Service {
    /// Starts an ingress on loopback ports chosen by the OS and waits until it listens.
    pub fn ingress(options: &ServiceOptions) -> Self {
        Self::try_start(Role::Ingress, options)
            .unwrap_or_else(|logs| panic!("ingress did not start: {logs:#?}"))
    }

    /// Like [`Service::ingress`], but returns the log lines when the process exits first.
    pub fn try_ingress(options: &ServiceOptions) -> Result<Self, Vec<String>> {
        Self::try_start(Role::Ingress, options)
    }

    /// Starts a worker with its metrics port on loopback and waits until it listens.
    pub fn worker(options: &ServiceOptions) -> Self {
        Self::try_start(Role::Worker, options)
            .unwrap_or_else(|logs| panic!("worker did not start: {logs:#?}"))
    }

    /// Starts `role` and waits for its "listening" line; `Err` with the logs if it exits.
    pub fn try_start(role: Role, options: &ServiceOptions) -> Result<Self, Vec<String>> {
        let scratch = ScratchDir::new();
        let config_path = scratch.path().join("config.toml");
        for (name, contents) in &options.files {
            std::fs::write(scratch.path().join(name), contents).expect("write scratch file");
        }
        let config = options
            .config_toml
            .replace("{scratch}", &scratch.path().display().to_string());
        std::fs::write(&config_path, config).expect("write config");
        let binary_name = match role {
            Role::Ingress => "inbound-ingress",
            Role::Worker => "inbound-worker",
        };
        let mut command = Command::new(binary(binary_name));
        for name in INHERITED_TO_REMOVE {
            command.env_remove(name);
        }
        command
            .arg("--config")
            .arg(&config_path)
            .args(["--database-url", &options.database_url])
            .args(["--metrics-listen", "127.0.0.1:0", "--log-format", "json"])
            .args(if role == Role::Ingress {
                &["--listen", "127.0.0.1:0"][..]
            } else {
                &[]
            })
            .args(&options.args)
            .env("RUST_LOG", "info")
            .envs(options.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn the service binary");
        let (logs, log_reader) = capture_lines_to_end(child.stderr.take().expect("stderr piped"));
        let listening = wait_for_line(&mut child, &logs, "\"listening\"", Duration::from_secs(30))?;
        let fields: serde_json::Value =
            serde_json::from_str(&listening).expect("listening line is JSON");
        let address = |field: &str| -> SocketAddr {
            fields[field]
                .as_str()
                .and_then(|text| text.parse().ok())
                .expect("listening line names addresses")
        };
        let metrics_addr = address("metrics_addr");
        Ok(Self {
            addr: if role == Role::Ingress {
                address("addr")
            } else {
                metrics_addr
            },
            metrics_addr,
            child,
            logs,
            log_reader,
            _scratch: scratch,
        })
    }

    /// `http://addr/webhooks/{integration}`.
    pub fn webhook_url(&self, integration: &str) -> String {
        format!("http://{}/webhooks/{integration}", self.addr)
    }

    /// `http://addr{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `http://metrics_addr{path}`.
    pub fn metrics_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.metrics_addr)
    }

    /// The text of `/metrics` on the ops port now.
    pub async fn metrics_page(&self) -> String {
        let answer = crate::http::HttpClient::new()
            .get(&self.metrics_url("/metrics"))
            .await
            .expect("metrics answer");
        String::from_utf8_lossy(&answer.body).into_owned()
    }

    /// Waits (5 s at most) for a log line that `matches`: a request's line is written
    /// after its answer. Panics naming `what` when none comes.
    pub async fn wait_for_log(&self, what: &str, matches: impl Fn(&str) -> bool) {
        crate::eventually(what, std::time::Duration::from_secs(5), async || {
            self.logs().iter().any(|line| matches(line)).then_some(())
        })
        .await;
    }

    /// Every log line so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().expect("log lock").clone()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Waits up to `limit` for the process to exit, and then (within the same limit) for
    /// its last log lines: a process that died has written them, but the reader may not
    /// have taken them from the pipe yet.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                while !self.log_reader.is_finished() && started.elapsed() < limit {
                    std::thread::sleep(Duration::from_millis(5));
                }
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Collects the lines of `stream` on a thread.
pub fn capture_lines(stream: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    capture_lines_to_end(stream).0
}

/// Collects the lines of `stream` on a thread, which ends at the end of the stream.
fn capture_lines_to_end(
    stream: impl std::io::Read + Send + 'static,
) -> (Arc<Mutex<Vec<String>>>, std::thread::JoinHandle<()>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            sink.lock().expect("log lock").push(line);
        }
    });
    (lines, reader)
}

/// Waits for a line containing `needle`; `Err` with every line if the child exits first.
pub fn wait_for_line(
    child: &mut Child,
    lines: &Mutex<Vec<String>>,
    needle: &str,
    limit: Duration,
) -> Result<String, Vec<String>> {
    let started = Instant::now();
    loop {
        let found = lines
            .lock()
            .expect("log lock")
            .iter()
            .find(|line| line.contains(needle))
            .cloned();
        if let Some(line) = found {
            return Ok(line);
        }
        if let Ok(Some(_status)) = child.try_wait() {
            // Let the reader thread take the last lines.
            std::thread::sleep(Duration::from_millis(100));
            return Err(lines.lock().expect("log lock").clone());
        }
        assert!(
            started.elapsed() < limit,
            "no {needle} line within {limit:?}: {:#?}",
            lines.lock().expect("log lock")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
