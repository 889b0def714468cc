//! A TCP proxy between a binary and PostgreSQL that a test can cut, stall, restore and
//! point at another server (a failover).
//! Cut: every open connection is closed and new ones are closed on arrival. Stalled:
//! connections stay open but no byte moves either way (a hung network or server).
//! Stranded: the connections open at that moment go silent for good, never closed, while
//! new ones pass (a server that vanished without a word, its address moved on). It
//! counts the bytes clients send, so a test can tell whether something reached the
//! database at all.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Cut,
    Stalled,
}

/// A running proxy.
pub struct DbProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    state: watch::Sender<State>,
    /// Connections numbered below this are stranded.
    stranded_below: watch::Sender<u64>,
    /// Connections accepted so far (the next one's number).
    accepted: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
    sent_to_server: Arc<AtomicU64>,
    target: watch::Sender<SocketAddr>,
}

impl DbProxy {
    /// Proxies a new loopback port to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let (state, watcher) = watch::channel(State::Open);
        let (stranded_below, stranded) = watch::channel(0u64);
        let accepted = Arc::new(AtomicU64::new(0));
        let numbering = Arc::clone(&accepted);
        let (target, current_target) = watch::channel(target);
        let sent_to_server = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&sent_to_server);
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                if *watcher.borrow() == State::Cut {
                    drop(client);
                    continue;
                }
                let watcher = watcher.clone();
                let counter = Arc::clone(&counter);
                let target = *current_target.borrow();
                let (number, stranded) =
                    (numbering.fetch_add(1, Ordering::SeqCst), stranded.clone());
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    let strand = Strand { number, stranded };
                    // When either direction ends, both halves drop and the pair closes.
                    tokio::select! {
                        () = pump(client_read, server_write, watcher.clone(), Some(counter), strand.clone()) => {}
                        () = pump(server_read, client_write, watcher, None, strand) => {}
                    }
                });
            }
        });
        Self {
            addr,
            state,
            stranded_below,
            accepted,
            task,
            sent_to_server,
            target,
        }
    }

    /// Bytes clients have sent towards the server so far.
    pub fn bytes_sent_to_server(&self) -> u64 {
        self.sent_to_server.load(Ordering::SeqCst)
    }

    /// Closes every connection and refuses new ones until [`DbProxy::restore`].
    pub fn cut(&self) {
        self.state.send_replace(State::Cut);
    }

    /// Holds every byte in both directions until [`DbProxy::restore`] or [`DbProxy::cut`].
    pub fn stall(&self) {
        self.state.send_replace(State::Stalled);
    }

    /// Strands every connection open now: each goes silent for good, never closed, as
    /// if its server had vanished; connections made afterwards pass as before.
    pub fn strand_open(&self) {
        self.stranded_below
            .send_replace(self.accepted.load(Ordering::SeqCst));
    }

    /// Sends new connections to `target` from now on (open ones stay where they are).
    pub fn retarget(&self, target: SocketAddr) {
        self.target.send_replace(target);
    }

    /// Lets traffic through again.
    pub fn restore(&self) {
        self.state.send_replace(State::Open);
    }

    /// `database_url` with its host and port replaced by the proxy's.
    pub fn rewrite_url(&self, database_url: &str) -> String {
        url_at(database_url, self.addr)
    }
}

/// `database_url` with its host and port replaced by `addr` (user, password, database and
/// parameters kept).
pub fn url_at(database_url: &str, addr: SocketAddr) -> String {
    let (scheme, rest) = database_url.split_once("://").expect("URL has a scheme");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let userinfo = authority
        .rsplit_once('@')
        .map(|(userinfo, _)| format!("{userinfo}@"))
        .unwrap_or_default();
    format!("{scheme}://{userinfo}{addr}/{path}")
}

impl Drop for DbProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Which connection a pump serves, and the number below which connections are stranded.
#[derive(Clone)]
struct Strand {
    number: u64,
    stranded: watch::Receiver<u64>,
}

/// Copies `from` to `to` while the state allows it, adding what it copies to `counter`;
/// once its connection is stranded, holds both halves and moves nothing, for good.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut state: watch::Receiver<State>,
    counter: Option<Arc<AtomicU64>>,
    mut strand: Strand,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let number = strand.number;
        let read = tokio::select! {
            read = from.read(&mut buffer) => match read {
                Ok(0) | Err(_) => return,
                Ok(read) => Some(read),
            },
            _ = state.wait_for(|state| *state == State::Cut) => return,
            _ = strand.stranded.wait_for(|below| number < *below) => None,
        };
        let stranded = number < *strand.stranded.borrow();
        let Some(read) = read.filter(|_| !stranded) else {
            return std::future::pending().await;
        };
        match state.wait_for(|state| *state != State::Stalled).await {
            Ok(current) if *current == State::Open => {}
            _ => return,
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
        if let Some(counter) = &counter {
            counter.fetch_add(read as u64, Ordering::SeqCst);
        }
    }
}

/// The host:port of `database_url`, resolved.
pub fn database_addr(database_url: &str) -> SocketAddr {
    use std::net::ToSocketAddrs;
    let rest = database_url.split_once("://").expect("URL has a scheme").1;
    let authority = rest.split(['/', '?']).next().expect("authority");
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host_port)| host_port);
    let host_port = if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:5432")
    };
    host_port
        .to_socket_addrs()
        .expect("resolve database host")
        .next()
        .expect("an address")
}
