//! A TCP proxy between a binary and PostgreSQL that a test can cut and restore: while cut,
//! every open connection is closed and new ones are closed as soon as they arrive.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy.
pub struct DbProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    cut: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl DbProxy {
    /// Proxies a new loopback port to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let (cut, watcher) = watch::channel(false);
        let watcher = Arc::new(watcher);
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let mut is_cut = (*watcher).clone();
                if *is_cut.borrow() {
                    drop(client);
                    continue;
                }
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (mut client, mut server) = (client, server);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = is_cut.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Self { addr, cut, task }
    }

    /// Closes every connection and refuses new ones until [`DbProxy::restore`].
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.cut.send_replace(false);
    }

    /// `database_url` with its host and port replaced by the proxy's.
    pub fn rewrite_url(&self, database_url: &str) -> String {
        let (scheme, rest) = database_url.split_once("://").expect("URL has a scheme");
        let (authority, path) = rest
            .split_once('/')
            .map_or((rest, ""), |(authority, path)| (authority, path));
        let userinfo = authority
            .rsplit_once('@')
            .map(|(userinfo, _)| format!("{userinfo}@"))
            .unwrap_or_default();
        format!("{scheme}://{userinfo}{}/{path}", self.addr)
    }
}

impl Drop for DbProxy {
    fn drop(&mut self) {
        self.task.abort();
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
