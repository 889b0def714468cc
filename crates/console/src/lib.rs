//! `inbound-console`: the on-call person's console in a browser. Server-rendered pages
//! (templates checked at compile time, CSS inside the binary, no script) over the same
//! store reads and decisions as the CLI: an overview, receipts and effects by filter (keyset
//! pages), one receipt or effect with its audit trail, and the review queue. Decisions are
//! POSTs from the console's own pages with the session's token, made by a named person
//! (`guard`); everything a sender wrote is shown as inert text (`view`).
//!
//! What a program uses: [`serve`], which runs the console from values — [`ConsoleSettings`]
//! (who acts, which origins may post, the page timeout), the configuration when there is
//! one, a pool and a bound listener — until a shutdown; `inboundctl console` is the
//! process over it. The modules behind it are private:
//!
//! - `guard`: who acts, and whether a state-changing request may act.
//! - `pages`: every GET, a module per resource (`overview`, `receipts`, `effects`, `review`).
//! - `actions`: the decisions (two POSTs each).
//! - `respond`: every response's headers and bodies.
//! - `view`: text shown as text, payloads indented within a bound.
//!
//! # Errors
//!
//! A page that cannot be answered is a page that says why: a bad filter or form (400), an
//! unknown id (404), a refused decision (403, 409), the database (503). [`serve`]'s own
//! error is a start-up refusal (settings that would show payloads to nobody in particular).

mod actions;
mod guard;
mod pages;
mod respond;
mod view;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use http::{Method, Request, Response};
use hyper::body::Incoming;
use inbound_core::config::Config;
use inbound_runtime::http::Body;
use inbound_runtime::server::{PeerAddr, ServerLimits};
use ipnet::IpNet;
use sqlx::PgPool;
use tokio::net::TcpListener;

use guard::{Actor, CsrfKey, Hosts, IdentityPolicy, SessionCookie};

pub use guard::person_name;

/// Who the console believes, and what it lets them do.
#[derive(Debug, Clone)]
pub enum Identity {
    /// An authenticating proxy names the person in `header`, believed only from
    /// `trusted` addresses (any other peer is refused).
    Proxy {
        /// The header the proxy sets (oauth2-proxy: `X-Forwarded-Email`).
        header: http::HeaderName,
        /// The proxy's addresses or networks.
        trusted: Vec<IpNet>,
    },
    /// One person for whoever reaches a loopback console (`--by`).
    Local(String),
    /// Nobody: the console shows what holds no payload and decides nothing.
    Nobody,
}

/// How a console serves: who acts, which origins may post decisions, how long a page's
/// statements may run. Built with [`ConsoleSettings::new`], which checks them against the
/// address the console listens on.
#[derive(Debug, Clone)]
pub struct ConsoleSettings {
    identity: Identity,
    read_only: bool,
    allowed_origins: Vec<String>,
    page_timeout: Duration,
}

impl ConsoleSettings {
    /// Settings for a console listening on `listen`, refused when they would let anyone
    /// who reaches it read payloads or decide without a name: `Local` only on loopback,
    /// and no console beyond loopback without a proxy that names the person. Each origin
    /// is `http` or `https`, `://`, a host and perhaps a port (no path). `page_timeout` is
    /// the server's bound on each statement of a page or decision.
    pub fn new(
        listen: SocketAddr,
        identity: Identity,
        read_only: bool,
        allowed_origins: Vec<String>,
        page_timeout: Duration,
    ) -> anyhow::Result<Self> {
        if let Identity::Local(name) = &identity {
            anyhow::ensure!(
                person_name(name.as_bytes()).is_some(),
                "--by must be a printable name of at most 200 characters, with no invisible character"
            );
            anyhow::ensure!(
                listen.ip().is_loopback(),
                "--by names whoever reaches the console, so it listens on loopback only (127.0.0.1 or ::1); to serve others, put an authenticating proxy in front and give --user-header and --trusted-proxy"
            );
        }
        if !matches!(identity, Identity::Proxy { .. }) {
            anyhow::ensure!(
                listen.ip().is_loopback(),
                "the console shows every payload to whoever reaches it: it listens on loopback only (127.0.0.1 or ::1) unless an authenticating proxy names the person (--user-header and --trusted-proxy)"
            );
        }
        let allowed_origins = allowed_origins
            .iter()
            .map(|origin| parse_origin(origin))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| anyhow::anyhow!(error))?;
        anyhow::ensure!(
            !page_timeout.is_zero(),
            "the page timeout must be at least 1 ms"
        );
        Ok(Self {
            identity,
            read_only,
            allowed_origins,
            page_timeout,
        })
    }
}

/// An origin as a browser sends it: `http` or `https`, `://`, a host and perhaps a port,
/// nothing else (no path, no trailing slash), lowercased.
pub fn parse_origin(text: &str) -> Result<String, String> {
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

/// Serves the console on `listener` until `shutdown` resolves: pages over `pool` (the
/// operator role's: it reads everything and decides only through the database's audited
/// functions), with `config`'s ids, owners and routes when given. Each unit of a page's
/// database work is one transaction whose statements the server cancels after the
/// settings' page timeout, and which the console gives up on after that and a margin.
pub async fn serve(
    settings: ConsoleSettings,
    config: Option<Config>,
    pool: PgPool,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let local = listener.local_addr().context("the console's address")?;
    let (user_header, local_person) = match settings.identity {
        Identity::Proxy { header, trusted } => (Some((header, trusted)), None),
        Identity::Local(name) => (None, Some(name.trim().to_owned())),
        Identity::Nobody => (None, None),
    };
    let console = Arc::new(Console {
        pool,
        config,
        identity: IdentityPolicy {
            user_header,
            local_person,
            read_only: settings.read_only,
        },
        hosts: Hosts::new(local, &settings.allowed_origins),
        cookie: SessionCookie::for_origins(&settings.allowed_origins),
        allowed_origins: settings.allowed_origins,
        csrf: CsrfKey::random(),
        statement_timeout: settings.page_timeout,
        limit: settings.page_timeout + inbound_store::bounded::STATEMENT_MARGIN,
    });
    tracing::info!(%local, read_only = settings.read_only, "console listening");
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
        shutdown,
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
        work: impl AsyncFnOnce(&mut sqlx::PgConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T, pages::Problem> {
        self.decide(work).await
    }

    /// [`Console::db`] for a decision, whose refusals (an unknown id, a row that moved)
    /// are answered as what they are, and only its database errors as 503.
    pub(crate) async fn decide<T, E>(
        &self,
        work: impl AsyncFnOnce(&mut sqlx::PgConnection) -> Result<T, E>,
    ) -> Result<T, pages::Problem>
    where
        E: From<sqlx::Error> + Into<pages::Problem>,
    {
        use sqlx::Connection;
        let bounded = async {
            let mut connection = self.pool.acquire().await?;
            let mut transaction = connection.begin().await?;
            inbound_store::bounded::limit_statements_in_transaction(
                &mut transaction,
                self.statement_timeout,
            )
            .await?;
            let done = work(&mut transaction).await?;
            transaction.commit().await?;
            Ok::<T, E>(done)
        };
        match tokio::time::timeout(self.limit, bounded).await {
            Ok(done) => done.map_err(Into::into),
            Err(_elapsed) => Err(pages::Problem::Database(inbound_store::bounded::gave_up(
                self.limit,
            ))),
        }
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
