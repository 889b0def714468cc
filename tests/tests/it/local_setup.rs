//! `make run` and `make test` on a stock Debian PostgreSQL. A scratch cluster made by
//! `pg_createcluster` keeps Debian's default authentication (peer on the socket,
//! scram-sha-256 over TCP, so `postgres@127.0.0.1` without a password is refused), and the
//! local set-up (`scripts/ensure-postgres.sh`) must still end with a URL that connects.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use inbound_tests::ctl::{Inboundctl, words};
use inbound_tests::process::ScratchDir;

/// A cluster made with Debian's defaults on a free port, stopped and dropped on drop.
struct DebianCluster {
    version: String,
    name: String,
    port: u16,
}

impl DebianCluster {
    fn create() -> Self {
        let versions = std::fs::read_dir("/etc/postgresql")
            .expect("Debian's postgresql-common (/etc/postgresql) is needed for this test");
        let version = versions
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .max_by_key(|version| version.parse::<u32>().unwrap_or(0))
            .expect("a PostgreSQL version under /etc/postgresql");
        let port = inbound_tests::ports::free_port();
        let name = format!("inbound_setup_{}_{port}", std::process::id());
        let cluster = Self {
            version,
            name,
            port,
        };
        cluster.run("pg_createcluster", &["-p", &port.to_string()]);
        cluster.run("pg_ctlcluster", &["start"]);
        cluster
    }

    fn run(&self, program: &str, extra: &[&str]) {
        let mut command = Command::new(program);
        if program == "pg_ctlcluster" {
            command.arg("--skip-systemctl-redirect");
        }
        let output = command
            .arg(&self.version)
            .arg(&self.name)
            .args(extra)
            .output()
            .unwrap_or_else(|error| panic!("{program}: {error} (Debian's postgresql-common)"));
        assert!(
            output.status.success(),
            "{program} failed: {}",
            text(&output)
        );
    }
}

impl Drop for DebianCluster {
    fn drop(&mut self) {
        let _ = Command::new("pg_dropcluster")
            .args(["--stop", &self.version, &self.name])
            .output();
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs the local set-up for the cluster on `port`, keeping its file at `env_file`.
fn local_setup(port: u16, env_file: &Path, database_url: Option<&str>) -> Output {
    let mut command = Command::new(repository().join("scripts/ensure-postgres.sh"));
    command
        .env("INBOUND_LOCAL_PGPORT", port.to_string())
        .env("INBOUND_ENV_FILE", env_file)
        .env_remove("DATABASE_URL")
        .env_remove("PGPASSWORD");
    if let Some(url) = database_url {
        command.env("DATABASE_URL", url);
    }
    command.output().expect("run scripts/ensure-postgres.sh")
}

/// Whether psql gets in over TCP with `url` and nothing else (never prompts).
fn connects(url: &str) -> Result<(), String> {
    let output = Command::new("psql")
        .args(["-w", "-Atq", "-d", url, "-c", "SELECT 1"])
        .env_remove("PGPASSWORD")
        .output()
        .expect("run psql");
    if output.status.success() {
        Ok(())
    } else {
        Err(text(&output))
    }
}

/// Whether this machine can make a Debian cluster: Debian's postgresql-common, as root
/// (as on the build machines and in CI, where this test runs). Elsewhere — macOS, a
/// database in a container, a developer without root — it says so and passes.
fn can_create_debian_clusters() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0");
    root && Path::new("/etc/postgresql").is_dir() && Path::new("/usr/bin/pg_createcluster").exists()
}

#[test]
fn the_local_setup_works_under_debians_stock_authentication() {
    if !can_create_debian_clusters() {
        eprintln!("skipped: needs root and Debian's postgresql-common (pg_createcluster)");
        return;
    }
    let cluster = DebianCluster::create();
    let port = cluster.port;
    let trust_url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    let refusal = connects(&trust_url).expect_err("Debian's default refuses password-less TCP");
    assert!(refusal.contains("password"), "{refusal}");

    let scratch = ScratchDir::new();
    let env_file = scratch.path().join(".env.local");
    let first = local_setup(port, &env_file, None);
    assert!(first.status.success(), "set-up failed: {}", text(&first));
    let url = String::from_utf8_lossy(&first.stdout).trim().to_owned();
    assert!(
        url.starts_with("postgres://inbound_dev:")
            && url.ends_with(&format!("@127.0.0.1:{port}/postgres")),
        "{url}"
    );
    connects(&url).expect("the URL the set-up printed connects over TCP");

    let kept = std::fs::read_to_string(&env_file).expect("the set-up keeps its URL");
    assert!(
        kept.contains(&format!("LOCAL_DATABASE_URL={url}\n")),
        "{kept}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&env_file)
        .expect("the env file")
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "the file holding a password is private"
    );

    let again = local_setup(port, &env_file, None);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout).trim(),
        url,
        "a second run reuses the role"
    );

    // The URL is good for what `make run` does with it: create and migrate its database.
    let database = format!("{}/inbound", url.rsplit_once('/').expect("a URL path").0);
    let migrate = Inboundctl::new().run(&words(&format!(
        "migrate --create-database --database-url {database}"
    )));
    assert!(migrate.status.success(), "{}", text(&migrate));
    let example = std::process::Command::new(inbound_tests::process::binary("inbound-worker"))
        .arg("migrate")
        .env("DATABASE_URL", &database)
        .output()
        .expect("inbound-worker migrate");
    assert!(example.status.success(), "{}", text(&example));

    // A stale password in the file (the cluster was rebuilt) is replaced, not reported.
    let stale = kept.replace(&url, &url.replace("inbound_dev:", "inbound_dev:0"));
    std::fs::write(&env_file, stale).expect("write the env file");
    let renewed = local_setup(port, &env_file, None);
    assert!(renewed.status.success(), "{}", text(&renewed));
    let renewed_url = String::from_utf8_lossy(&renewed.stdout).trim().to_owned();
    connects(&renewed_url).expect("the renewed URL connects");
    let kept = std::fs::read_to_string(&env_file).expect("the env file");
    assert_eq!(kept.matches("LOCAL_DATABASE_URL=").count(), 1, "{kept}");

    // A DATABASE_URL the server refuses is an error that says so, before any test runs.
    let refused = local_setup(port, &env_file, Some(&trust_url));
    assert!(!refused.status.success());
    let message = text(&refused);
    assert!(
        message.contains("DATABASE_URL") && message.contains("refuses"),
        "{message}"
    );
}

/// `make run` on a taken port stops before anything is built or started, naming the port
/// and the variable that moves it — never a banner whose pasted command reaches whatever
/// holds the port.
#[test]
fn make_run_on_a_taken_port_says_so_and_starts_nothing() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = taken.local_addr().expect("addr").to_string();
    let output = Command::new(repository().join("scripts/run-local.sh"))
        .env("INBOUND_LISTEN", &address)
        .env("DATABASE_URL", "postgres://unused@127.0.0.1:1/unused")
        .output()
        .expect("run scripts/run-local.sh");
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let said = text(&output);
    assert!(
        said.contains(&address) && said.contains("INBOUND_LISTEN"),
        "{said}"
    );
    assert!(!said.contains("Send a signed test event"), "{said}");
}
