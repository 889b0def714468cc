//! Who is acting, and whether a state-changing request may act: the person comes from the
//! authenticating proxy's user header (believed only from a trusted proxy address) or from
//! `--by` for a local session; without one the console is read-only. A POST must come from
//! the console's own origin (`Origin`, `Sec-Fetch-Site`) and carry the session's CSRF token,
//! an HMAC of the session cookie and the person under a key that lives as long as the
//! process.

use std::net::IpAddr;

use hmac::{KeyInit, Mac};
use http::HeaderMap;
use http::header::{COOKIE, HOST, HeaderName, ORIGIN};
use ipnet::IpNet;
use subtle::ConstantTimeEq;

/// The session cookie, as the console names and sets it: behind an HTTPS proxy (an
/// `https://` `--allowed-origin`) it is `Secure` and carries the `__Host-` prefix, so a
/// browser sends it only over HTTPS, only to this host, and no plain-HTTP response or
/// sibling domain can plant one (RFC 6265bis, "Cookie Name Prefixes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionCookie {
    /// Served over plain HTTP (loopback).
    Plain,
    /// Served to browsers over HTTPS.
    Secure,
}

impl SessionCookie {
    /// The cookie for a console whose browsers reach it at `allowed_origins`.
    pub fn for_origins(allowed_origins: &[String]) -> Self {
        if allowed_origins
            .iter()
            .any(|origin| origin.starts_with("https://"))
        {
            Self::Secure
        } else {
            Self::Plain
        }
    }

    /// The cookie's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "inbound_console_session",
            Self::Secure => "__Host-inbound_console_session",
        }
    }

    /// The `Set-Cookie` value that gives `session`: sent back only to the console, never
    /// to a script or another site.
    pub fn set(self, session: &str) -> String {
        let secure = match self {
            Self::Plain => "",
            Self::Secure => "; Secure",
        };
        format!(
            "{}={session}; Path=/; HttpOnly; SameSite=Strict{secure}",
            self.name()
        )
    }
}

/// The longest person name recorded (an audit column, shown on every page).
const MAX_NAME_CHARS: usize = 200;

/// How the console learns who is acting.
#[derive(Debug, Clone)]
pub struct IdentityPolicy {
    /// The header an authenticating proxy sets, with the addresses it is believed from.
    pub user_header: Option<(HeaderName, Vec<IpNet>)>,
    /// A local session's person (`--by`).
    pub local_person: Option<String>,
    /// `--read-only`: nobody decides, whoever they are.
    pub read_only: bool,
}

/// Who a request acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A named person who may decide.
    Person(String),
    /// Shown everything, may decide nothing; the reason is shown on every page.
    Viewer {
        /// Why they may not decide.
        why: &'static str,
        /// Their name, when the proxy or `--by` gave one (a `--read-only` console's
        /// viewers are still named: what they read is recorded with it).
        name: Option<String>,
    },
}

impl Actor {
    /// The person's name, when they may decide.
    pub fn person(&self) -> Option<&str> {
        match self {
            Self::Person(name) => Some(name),
            Self::Viewer { .. } => None,
        }
    }

    /// The name a payload read is recorded with: the person's, else the viewer's when one
    /// was given. `None`: nobody is named, and no payload is shown (a read is recorded
    /// with a name or not at all).
    pub fn reader(&self) -> Option<&str> {
        match self {
            Self::Person(name)
            | Self::Viewer {
                name: Some(name), ..
            } => Some(name),
            Self::Viewer { name: None, .. } => None,
        }
    }

    fn viewer(why: &'static str) -> Self {
        Self::Viewer { why, name: None }
    }
}

impl IdentityPolicy {
    /// Who the request from `peer` with `headers` acts for; behind a proxy, a request
    /// that did not come through it is refused outright (it could read every payload).
    pub fn actor(&self, peer: IpAddr, headers: &HeaderMap) -> Result<Actor, Forbidden> {
        // An IPv4 client of a dual-stack listener arrives as ::ffff:a.b.c.d.
        let peer = peer.to_canonical();
        let named = if let Some((header, trusted)) = &self.user_header {
            if !trusted.iter().any(|net| net.contains(&peer)) {
                return Err(Forbidden::NotThroughTheProxy);
            }
            let mut values = headers.get_all(header).iter();
            match (values.next(), values.next()) {
                (Some(value), None) => match person_name(value.as_bytes()) {
                    Some(name) => Ok(name),
                    None => Err("the proxy's user header is not a usable name"),
                },
                // A proxy that appends to a client's header instead of replacing it.
                (Some(_), Some(_)) => Err("the proxy's user header appears more than once"),
                (None, _) => Err("the proxy named nobody"),
            }
        } else {
            self.local_person
                .clone()
                .ok_or("no identity: start the console with --by NAME to decide")
        };
        Ok(match named {
            _ if self.read_only => Actor::Viewer {
                why: "this console was started --read-only",
                name: named.ok(),
            },
            Ok(name) => Actor::Person(name),
            Err(why) => Actor::viewer(why),
        })
    }
}

/// A person's name from a header or a flag: printable UTF-8, trimmed, not empty, at most
/// [`MAX_NAME_CHARS`] characters, with no control or invisible character (`al\u{200b}ice`
/// is another person who reads as `alice` in every tool but this one) and no comma.
pub fn person_name(value: &[u8]) -> Option<String> {
    inbound_core::display::person_name(std::str::from_utf8(value).ok()?, MAX_NAME_CHARS)
}

/// The CSRF key of this process: tokens of an earlier process are refused (the form is
/// shown again with a fresh one).
pub struct CsrfKey([u8; 32]);

impl CsrfKey {
    /// A new random key.
    pub fn random() -> Self {
        Self(rand::random())
    }

    /// The token the forms of `session` carry for `person`.
    pub fn token(&self, session: &str, person: &str) -> String {
        hex::encode(self.mac(session, person).finalize().into_bytes())
    }

    /// Whether `token` is the one of `session` and `person` (compared in constant time).
    pub fn verify(&self, session: &str, person: &str, token: &str) -> bool {
        let Ok(token) = hex::decode(token) else {
            return false;
        };
        let expected = self.mac(session, person).finalize().into_bytes();
        expected.as_slice().ct_eq(&token).into()
    }

    /// The seal of a confirmation page: what the person was shown (`parts`: the decision's
    /// path, action, reason, the status and version seen, the ids), for this session and
    /// person. A confirmation posted with other parts, or not shown by this process, is
    /// refused.
    pub fn seal(&self, session: &str, person: &str, parts: &[&str]) -> String {
        let mut mac = self.mac(session, person);
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        hex::encode(mac.finalize().into_bytes())
    }

    /// Whether `seal` is [`CsrfKey::seal`] of these parts (compared in constant time).
    pub fn verify_seal(&self, session: &str, person: &str, parts: &[&str], seal: &str) -> bool {
        let Ok(seal) = hex::decode(seal) else {
            return false;
        };
        let expected = hex::decode(self.seal(session, person, parts)).unwrap_or_default();
        expected.as_slice().ct_eq(&seal).into()
    }

    fn mac(&self, session: &str, person: &str) -> hmac::Hmac<sha2::Sha256> {
        let mut mac =
            <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&self.0).expect("any key size");
        // Lengths first, so that no two (session, person) pairs sign the same bytes.
        mac.update(&(session.len() as u64).to_be_bytes());
        mac.update(session.as_bytes());
        mac.update(&(person.len() as u64).to_be_bytes());
        mac.update(person.as_bytes());
        mac
    }
}

/// A new session id: 32 random bytes, hex.
pub fn new_session() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// The session cookie's value, when the request carries a well-formed one.
pub fn session_of(headers: &HeaderMap, cookie: SessionCookie) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|cookies| cookies.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == cookie.name())
        .map(|(_, value)| value.to_owned())
        .filter(|value| value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The `Host` values a request may name: the listen address and, on loopback, the names
/// of loopback; the hosts of the allowed origins. A page that rebinds its own name to the
/// console's address is same-origin to the browser, but names its own host: refused.
#[derive(Debug, Clone)]
pub struct Hosts(Vec<String>);

impl Hosts {
    pub fn new(listen: std::net::SocketAddr, allowed_origins: &[String]) -> Self {
        let port = listen.port();
        let mut hosts = vec![listen.to_string()];
        if listen.ip().is_loopback() {
            hosts.extend([
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("[::1]:{port}"),
            ]);
        }
        for origin in allowed_origins {
            let (scheme, authority) = origin.split_once("://").unwrap_or(("https", origin));
            let authority = authority.trim_end_matches('/');
            hosts.push(authority.to_owned());
            let default_port = if scheme == "http" { ":80" } else { ":443" };
            match authority.strip_suffix(default_port) {
                Some(bare) => hosts.push(bare.to_owned()),
                None if !authority.contains(':') || authority.ends_with(']') => {
                    hosts.push(format!("{authority}{default_port}"));
                }
                None => {}
            }
        }
        Self(
            hosts
                .into_iter()
                .map(|host| host.to_ascii_lowercase())
                .collect(),
        )
    }

    /// Whether the request's `Host` is one of them.
    pub fn allow(&self, headers: &HeaderMap) -> bool {
        headers
            .get(HOST)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|host| self.0.iter().any(|own| own.eq_ignore_ascii_case(host)))
    }
}

/// Why a state-changing request was refused before its form was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    /// Read-only, or nobody named.
    NoIdentity,
    /// From another site, or without an `Origin`.
    CrossSite,
    /// Without the session's token.
    BadToken,
    /// Behind a proxy, from an address that is not the proxy's.
    NotThroughTheProxy,
}

impl Forbidden {
    /// What the refusal page says.
    pub fn explain(self) -> &'static str {
        match self {
            Self::NoIdentity => {
                "nobody is named for this request, or the console is read-only: nothing was changed"
            }
            Self::CrossSite => {
                "this form was not sent from the console's own pages (Origin): nothing was changed"
            }
            Self::NotThroughTheProxy => {
                "this console answers only through its authenticating proxy"
            }
            Self::BadToken => {
                "the form's token does not match this session (an old page, or another site's form): reload the page and decide again; nothing was changed"
            }
        }
    }
}

/// Checks that a POST comes from a page of this console. A browser says where a request
/// comes from in `Sec-Fetch-Site`: it must be `same-origin`. Under the console's
/// `Referrer-Policy: no-referrer` a browser's form POST carries `Origin: null`, so `Origin`
/// decides only when it names a site: then it must be the request's own host (or an
/// allowed origin). A request that says neither (no `Sec-Fetch-Site`, no usable `Origin`)
/// is refused: it did not come from a browser on the console's pages.
pub fn same_origin(headers: &HeaderMap, allowed_origins: &[String]) -> Result<(), Forbidden> {
    let fetched_from = headers.get("sec-fetch-site").map(|site| site.as_bytes());
    if fetched_from.is_some_and(|site| site != b"same-origin") {
        return Err(Forbidden::CrossSite);
    }
    let origin = headers
        .get(ORIGIN)
        .and_then(|value| value.to_str().ok())
        .filter(|origin| *origin != "null");
    let Some(origin) = origin else {
        return if fetched_from.is_some() {
            Ok(())
        } else {
            Err(Forbidden::CrossSite)
        };
    };
    if allowed_origins.iter().any(|allowed| allowed == origin) {
        return Ok(());
    }
    let host = headers
        .get(HOST)
        .and_then(|value| value.to_str().ok())
        .ok_or(Forbidden::CrossSite)?;
    let own = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    if own == Some(host) {
        Ok(())
    } else {
        Err(Forbidden::CrossSite)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("a header value"));
        }
        map
    }

    #[test]
    fn the_user_header_is_believed_only_from_a_trusted_proxy() {
        let policy = IdentityPolicy {
            user_header: Some((
                HeaderName::from_static("x-forwarded-user"),
                vec!["10.0.0.0/8".parse().expect("a network")],
            )),
            local_person: None,
            read_only: false,
        };
        let alice = headers(&[("x-forwarded-user", "alice@example.com")]);
        assert_eq!(
            policy.actor("10.1.2.3".parse().expect("ip"), &alice),
            Ok(Actor::Person("alice@example.com".into()))
        );
        assert_eq!(
            policy.actor("::ffff:10.1.2.3".parse().expect("ip"), &alice),
            Ok(Actor::Person("alice@example.com".into()))
        );
        assert_eq!(
            policy.actor("192.168.1.1".parse().expect("ip"), &alice),
            Err(Forbidden::NotThroughTheProxy)
        );
        assert!(matches!(
            policy.actor("10.1.2.3".parse().expect("ip"), &headers(&[])),
            Ok(Actor::Viewer { name: None, .. })
        ));
        let read_only = IdentityPolicy {
            read_only: true,
            ..policy
        };
        // Read-only still knows who reads (recorded with what they read).
        assert_eq!(
            read_only.actor("10.1.2.3".parse().expect("ip"), &alice),
            Ok(Actor::Viewer {
                why: "this console was started --read-only",
                name: Some("alice@example.com".into())
            })
        );
    }

    #[test]
    fn only_the_consoles_own_hosts_are_answered() {
        let local = Hosts::new("127.0.0.1:8090".parse().expect("addr"), &[]);
        for host in [
            "127.0.0.1:8090",
            "localhost:8090",
            "LOCALHOST:8090",
            "[::1]:8090",
        ] {
            assert!(local.allow(&headers(&[("host", host)])), "{host}");
        }
        for host in [
            "rebind.attacker.example:8090",
            "127.0.0.1:8091",
            "localhost",
        ] {
            assert!(!local.allow(&headers(&[("host", host)])), "{host}");
        }
        assert!(!local.allow(&headers(&[])));
        let proxied = Hosts::new(
            "127.0.0.1:8090".parse().expect("addr"),
            &["https://inbound-console.example.com".to_owned()],
        );
        assert!(proxied.allow(&headers(&[("host", "inbound-console.example.com")])));
        assert!(proxied.allow(&headers(&[("host", "inbound-console.example.com:443")])));
    }

    #[test]
    fn a_seal_holds_what_was_shown() {
        let key = CsrfKey::random();
        let session = new_session();
        let seal = key.seal(&session, "alice", &["close", "failed", "1,2"]);
        assert!(key.verify_seal(&session, "alice", &["close", "failed", "1,2"], &seal));
        assert!(!key.verify_seal(&session, "alice", &["close", "pending", "1,2"], &seal));
        assert!(!key.verify_seal(&session, "alice", &["close", "failed", "1,2,3"], &seal));
        assert!(!key.verify_seal(&session, "alice", &["close", "failed1,2"], &seal));
        assert!(!key.verify_seal(&session, "bob", &["close", "failed", "1,2"], &seal));
        assert!(!key.verify_seal(&session, "alice", &["close", "failed", "1,2"], ""));
    }

    #[test]
    fn names_are_printable_trimmed_and_bounded() {
        assert_eq!(person_name(b"  bob "), Some("bob".into()));
        assert_eq!(person_name(b""), None);
        assert_eq!(person_name(b"a\x07b"), None);
        assert_eq!(person_name(&[0xff, 0xfe]), None);
        // Another person who reads as alice everywhere but here (red team 2026-12-05, F6).
        for invisible in [
            "al\u{200b}ice",
            "alice\u{202e}",
            "\u{2060}alice",
            "ali\u{ad}ce",
            "alice\u{fe0f}",
            "al\u{1d173}ice",
            "al\u{3164}ice",
            "alice\u{e0101}",
        ] {
            assert_eq!(person_name(invisible.as_bytes()), None, "{invisible:?}");
        }
        assert_eq!(person_name("x".repeat(201).as_bytes()), None);
        assert_eq!(person_name(b"mallory, bob@example.com"), None);
    }

    #[test]
    fn a_token_belongs_to_one_session_one_person_and_one_process() {
        let key = CsrfKey::random();
        let session = new_session();
        let token = key.token(&session, "alice");
        assert!(key.verify(&session, "alice", &token));
        assert!(!key.verify(&session, "mallory", &token));
        assert!(!key.verify(&new_session(), "alice", &token));
        assert!(!CsrfKey::random().verify(&session, "alice", &token));
        assert!(!key.verify(&session, "alice", "not hex"));
        assert!(!key.verify(&session, "alice", ""));
    }

    #[test]
    fn only_the_consoles_own_origin_may_post() {
        let own = headers(&[
            ("host", "127.0.0.1:8090"),
            ("origin", "http://127.0.0.1:8090"),
        ]);
        assert_eq!(same_origin(&own, &[]), Ok(()));
        let other = headers(&[
            ("host", "127.0.0.1:8090"),
            ("origin", "http://evil.example"),
        ]);
        assert_eq!(same_origin(&other, &[]), Err(Forbidden::CrossSite));
        let none = headers(&[("host", "127.0.0.1:8090")]);
        assert_eq!(same_origin(&none, &[]), Err(Forbidden::CrossSite));
        let fetched = headers(&[
            ("host", "127.0.0.1:8090"),
            ("origin", "http://127.0.0.1:8090"),
            ("sec-fetch-site", "cross-site"),
        ]);
        assert_eq!(same_origin(&fetched, &[]), Err(Forbidden::CrossSite));
        // A browser's form under no-referrer: Origin null, Sec-Fetch-Site same-origin.
        let browser = headers(&[
            ("host", "127.0.0.1:8090"),
            ("origin", "null"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert_eq!(same_origin(&browser, &[]), Ok(()));
        let null_alone = headers(&[("host", "127.0.0.1:8090"), ("origin", "null")]);
        assert_eq!(same_origin(&null_alone, &[]), Err(Forbidden::CrossSite));
        let lying = headers(&[
            ("host", "127.0.0.1:8090"),
            ("origin", "http://evil.example"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert_eq!(same_origin(&lying, &[]), Err(Forbidden::CrossSite));
        let proxied = headers(&[
            ("host", "console.internal:8090"),
            ("origin", "https://inbound.example.com"),
        ]);
        assert_eq!(
            same_origin(&proxied, &["https://inbound.example.com".to_owned()]),
            Ok(())
        );
    }

    #[test]
    fn a_session_cookie_is_read_among_others_and_checked() {
        let plain = SessionCookie::Plain.name();
        let session = new_session();
        let cookies = headers(&[("cookie", &format!("a=1; {plain}={session}; b=2"))]);
        assert_eq!(
            session_of(&cookies, SessionCookie::Plain),
            Some(session.clone())
        );
        let forged = headers(&[("cookie", &format!("{plain}=<script>"))]);
        assert_eq!(session_of(&forged, SessionCookie::Plain), None);
        // Behind HTTPS only the prefixed cookie counts: a plain one planted over HTTP
        // (or by a sibling domain) is not the session.
        assert_eq!(session_of(&cookies, SessionCookie::Secure), None);
        let secure = headers(&[(
            "cookie",
            &format!("__Host-inbound_console_session={session}"),
        )]);
        assert_eq!(session_of(&secure, SessionCookie::Secure), Some(session));
    }

    /// Behind an HTTPS proxy the cookie is `Secure` with the `__Host-` prefix (red team
    /// 2026-12-05, F6); on loopback it cannot be (plain HTTP).
    #[test]
    fn the_session_cookie_is_secure_behind_https() {
        let https = SessionCookie::for_origins(&["https://inbound.example.com".to_owned()]);
        assert_eq!(
            https.set("ab"),
            "__Host-inbound_console_session=ab; Path=/; HttpOnly; SameSite=Strict; Secure"
        );
        let local = SessionCookie::for_origins(&[]);
        assert_eq!(
            local.set("ab"),
            "inbound_console_session=ab; Path=/; HttpOnly; SameSite=Strict"
        );
    }
}
