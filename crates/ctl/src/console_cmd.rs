//! `inboundctl console`: the flags of the operator's console, and the process over
//! `inbound_console::serve` — the configuration read (ids, owners and routes; no secret
//! needed), a pool of the console's own bounded by the page timeout, the listener bound,
//! then served until SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use inbound_console::{ConsoleSettings, Identity, parse_origin};
use ipnet::IpNet;

use crate::operate::DatabaseArgs;
use crate::selection::ConfigArg;

/// `inboundctl console`.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    config: ConfigArg,
    /// Address to listen on. Loopback by default: to serve others, put an authenticating
    /// proxy in front (docs/console.md) and give --user-header and --trusted-proxy.
    #[arg(long, env = "INBOUND_CONSOLE_LISTEN", default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// The header an authenticating proxy sets to the signed-in person (oauth2-proxy:
    /// X-Forwarded-User or X-Auth-Request-User); believed only from --trusted-proxy.
    #[arg(
        long,
        env = "INBOUND_CONSOLE_USER_HEADER",
        requires = "trusted_proxies"
    )]
    user_header: Option<http::HeaderName>,
    /// An address or network of the authenticating proxy (repeatable, or comma-separated).
    #[arg(long = "trusted-proxy", env = "INBOUND_CONSOLE_TRUSTED_PROXIES", value_delimiter = ',',
          value_parser = parse_network, requires = "user_header")]
    trusted_proxies: Vec<IpNet>,
    /// A local session's person: decisions and payload reads are recorded with this name.
    /// Without it (and without --user-header) the console is read-only and shows no
    /// payload.
    #[arg(long, conflicts_with = "user_header")]
    by: Option<String>,
    /// Show everything, decide nothing, whoever asks.
    #[arg(long)]
    read_only: bool,
    /// An origin the browser shows besides the console's own host (the proxy's public
    /// URL, e.g. https://inbound.example.com), from which decisions may be posted.
    #[arg(long = "allowed-origin", value_parser = parse_origin)]
    allowed_origins: Vec<String>,
    /// Log format; JSON when stderr is not a terminal.
    #[arg(long, env = "INBOUND_LOG_FORMAT", value_enum)]
    log_format: Option<inbound_runtime::logging::LogFormat>,
    /// Database connections the console holds at most (each page takes one briefly): with
    /// --page-timeout-secs, the most of the database the console can take from the
    /// ingress that shares it.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=32))]
    max_connections: u32,
    /// Cancel any one statement of a page or decision after this many seconds (1 to 60):
    /// every page reads a bounded amount, so one that takes longer is a database in
    /// trouble, and the console gives its connection back rather than add to it.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
    page_timeout_secs: u64,
}

/// An address (`10.0.0.7`) or a network (`10.0.0.0/8`).
fn parse_network(text: &str) -> Result<IpNet, String> {
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from))
        .map_err(|_| {
            format!("{text:?} is neither an address (10.0.0.7) nor a network (10.0.0.0/8)")
        })
}

/// Serves the console until SIGTERM or SIGINT.
pub async fn run(args: ConsoleArgs) -> anyhow::Result<()> {
    inbound_runtime::logging::init_logging(args.log_format);
    let identity = match (args.user_header, args.by) {
        (Some(header), _) => Identity::Proxy {
            header,
            trusted: args.trusted_proxies,
        },
        (None, Some(by)) => Identity::Local(by),
        (None, None) => Identity::Nobody,
    };
    let page_timeout = Duration::from_secs(args.page_timeout_secs);
    let settings = ConsoleSettings::new(
        args.listen,
        identity,
        args.read_only,
        args.allowed_origins,
        page_timeout,
    )?;
    // Ids, owners and routes only: the console needs none of the secrets.
    let config = args
        .config
        .config
        .as_deref()
        .map(|path| {
            crate::sign::load_for_reading(path).with_context(|| format!("{}", path.display()))
        })
        .transpose()?;
    let (pool, _) = args
        .database
        .pool(args.max_connections, page_timeout, "inboundctl-console")
        .await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr()?;
    // A test or a script reads this line to learn the port of --listen 127.0.0.1:0.
    crate::output::out!("console listening on http://{local}");
    inbound_console::serve(
        settings,
        config,
        pool,
        listener,
        inbound_runtime::signals::shutdown_signal(),
    )
    .await
}
