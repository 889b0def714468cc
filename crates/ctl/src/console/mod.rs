//! `inboundctl console`: the on-call person's console in a browser. Server-rendered pages
//! (templates checked at compile time, CSS inside the binary, no script) over the same
//! store reads and decisions as the CLI: an overview, receipts and effects by filter (keyset
//! pages), one receipt or effect with its audit trail, and the review queue. Decisions are
//! POSTs from the console's own pages with the session's token, made by a named person
//! ([`guard`]); everything a sender wrote is shown as inert text ([`view`]).

mod actions;
mod guard;
mod pages;
mod respond;
mod view;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use http::{Method, Request, Response};
use hyper::body::Incoming;
use inbound_core::config::Config;
use inbound_runtime::http::Body;
use inbound_runtime::server::{PeerAddr, ServerLimits};
use ipnet::IpNet;
use sqlx::PgPool;

use crate::operate::DatabaseArgs;
use crate::selection::ConfigArg;
use guard::{Actor, CsrfKey, Hosts, IdentityPolicy, SessionCookie};

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
    /// A local session's person: decisions are recorded with this name. Without it (and
    /// without --user-header) the console is read-only.
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

/// An origin as a browser sends it: `http` or `https`, `://`, a host and perhaps a port,
/// nothing else (no path, no trailing slash), lowercased.
fn parse_origin(text: &str) -> Result<String, String> {
    let lower = text.to_ascii_lowercase();
    let authority = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    match authority {
        Some(authority)
            if !authority.is_empty()
                && !authority.contains(['/', '?', '#', '@', ' '])
                && !authority.ends_with(':') =>
        {
            Ok(lower)
        }
        _ => Err(format!(
            "{text:?} is not an origin: http:// or https://, a host and perhaps a port, no path (https://inbound-console.example.com)"
        )),
    }
}

/// Everything a request needs.
pub(crate) struct Console {
    pool: PgPool,
    config: Option<Config>,
    identity: IdentityPolicy,
    allowed_origins: Vec<String>,
    /// The `Host` values requests may name.
    hosts: Hosts,
    csrf: CsrfKey,
    /// The session cookie's name and attributes.
    cookie: SessionCookie,
    /// How long any one statement of a page or decision may run on the server.
    statement_timeout: Duration,
    /// How long one page's or decision's database work may take.
    limit: Duration,
}

/// Serves the console until SIGTERM or SIGINT.
pub async fn run(args: ConsoleArgs) -> anyhow::Result<()> {
    inbound_runtime::logging::init_logging(args.log_format);
    if let Some(by) = &args.by
        && guard::person_name(by.as_bytes()).is_none()
    {
        anyhow::bail!("--by must be a printable name of at most 200 characters");
    }
    if args.by.is_some() && !args.listen.ip().is_loopback() {
        anyhow::bail!(
            "--by names whoever reaches the console, so it listens on loopback only (127.0.0.1 or ::1); to serve others, put an authenticating proxy in front and give --user-header and --trusted-proxy"
        );
    }
    if args.user_header.is_none() && !args.listen.ip().is_loopback() {
        anyhow::bail!(
            "the console shows every payload to whoever reaches it: it listens on loopback only (127.0.0.1 or ::1) unless an authenticating proxy names the person (--user-header and --trusted-proxy)"
        );
    }
    // Ids, owners and routes only: the console needs none of the secrets.
    let config = args
        .config
        .config
        .as_deref()
        .map(|path| {
            crate::sign::load_for_reading(path).with_context(|| format!("{}", path.display()))
        })
        .transpose()?;
    let (pool, limit) = args
        .database
        .pool(
            args.max_connections,
            Duration::from_secs(args.page_timeout_secs),
            "inboundctl-console",
        )
        .await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr()?;
    let console = Arc::new(Console {
        pool,
        config,
        identity: IdentityPolicy {
            user_header: args
                .user_header
                .map(|header| (header, args.trusted_proxies.clone())),
            local_person: args.by.map(|by| by.trim().to_owned()),
            read_only: args.read_only,
        },
        hosts: Hosts::new(local, &args.allowed_origins),
        cookie: SessionCookie::for_origins(&args.allowed_origins),
        statement_timeout: limit.saturating_sub(inbound_store::bounded::STATEMENT_MARGIN),
        allowed_origins: args.allowed_origins,
        csrf: CsrfKey::random(),
        limit,
    });
    // A test or a script reads this line to learn the port of --listen 127.0.0.1:0.
    crate::output::out!("console listening on http://{local}");
    tracing::info!(%local, read_only = args.read_only, "console listening");
    let limits = ServerLimits {
        header_read_timeout: Duration::from_secs(10),
        max_connections: 64,
        shutdown_grace: Duration::from_secs(5),
        max_buf_size: inbound_runtime::server::MAX_REQUEST_HEAD_BYTES,
        record_peer: true,
    };
    inbound_runtime::server::serve(
        listener,
        limits,
        move |request| handle(Arc::clone(&console), request),
        inbound_runtime::signals::shutdown_signal(),
    )
    .await;
    Ok(())
}

/// One request: the page or decision its method and path name, with the security headers,
/// within the console's limit.
async fn handle(console: Arc<Console>, request: Request<Incoming>) -> Response<Body> {
    // A page is a few bounded reads; a decision reads its form, then the row (twice: the
    // confirmation and the version check) and decides: each step bounded, so this bounds
    // them all without cutting one short.
    let deadline = if request.method() == Method::POST {
        actions::FORM_TIMEOUT + console.limit * 3
    } else {
        console.limit + Duration::from_secs(1)
    };
    let mut response = match tokio::time::timeout(deadline, answer(&console, request)).await {
        Ok(response) => response,
        Err(_) => respond::unavailable("the page took longer than the console's limit"),
    };
    respond::secure(&mut response);
    response
}

async fn answer(console: &Console, request: Request<Incoming>) -> Response<Body> {
    // Before anything is read or decided: a request naming another host is a page that
    // rebound its own name to this address.
    if !console.hosts.allow(request.headers()) {
        return respond::misdirected();
    }
    let peer = request
        .extensions()
        .get::<PeerAddr>()
        .map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |peer| peer.0.ip());
    let actor = match console.identity.actor(peer, request.headers()) {
        Ok(actor) => actor,
        Err(refusal) => return respond::forbidden(refusal.explain()),
    };
    let session = guard::session_of(request.headers(), console.cookie);
    let (session, new_session) = match session {
        Some(session) => (session, false),
        None => (guard::new_session(), true),
    };
    let context = pages::Context::new(console, &actor, &session);
    let path = request.uri().path().to_owned();
    let segments: Vec<&str> = path.split('/').filter(|part| !part.is_empty()).collect();
    let mut response = match request.method() {
        &Method::GET | &Method::HEAD => {
            let query = request.uri().query().unwrap_or("").to_owned();
            pages::get(console, &context, &segments, &query).await
        }
        &Method::POST => actions::post(console, &context, &actor, &session, request).await,
        _ => respond::method_not_allowed(),
    };
    if new_session {
        respond::set_session_cookie(&mut response, console.cookie, &session);
    }
    response
}

impl Console {
    /// Runs one unit of the console's database work on a pooled connection, in one
    /// transaction whose every statement the server cancels after the page timeout (also
    /// behind a transaction pooler, where the role's longer timeout is the session's), and
    /// gives it up on the client after the limit. A page that records a payload read and
    /// then fails records nothing.
    pub(crate) async fn db<T>(
        &self,
        work: impl AsyncFnOnce(&mut sqlx::PgConnection) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        use sqlx::Connection;
        let bounded = async {
            let mut connection = self
                .pool
                .acquire()
                .await
                .context("no database connection")?;
            let mut transaction = connection.begin().await?;
            inbound_store::bounded::limit_statements_in_transaction(
                &mut transaction,
                self.statement_timeout,
            )
            .await?;
            let done = work(&mut transaction).await?;
            transaction.commit().await?;
            Ok(done)
        };
        tokio::time::timeout(self.limit, bounded)
            .await
            .map_err(|_| anyhow::anyhow!("the database gave no answer within {:?}", self.limit))?
    }

    /// The configuration, when the console was given one.
    pub(crate) fn config(&self) -> Option<&Config> {
        self.config.as_ref()
    }
}

/// The actor's banner text, for every page.
pub(crate) fn who(actor: &Actor) -> String {
    match actor {
        Actor::Person(name) => format!("deciding as {}", view::text(name)),
        Actor::Viewer { why, .. } => format!("read-only: {why}"),
    }
}
