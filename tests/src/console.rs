//! `inboundctl console` as the suites run it: the real binary on a free loopback port (read
//! from the line it prints), and a session as a browser holds one — the cookie the console
//! set, the page's form token, and the console's own `Origin` on every POST unless a test
//! says otherwise.

use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use crate::ctl::Inboundctl;
use crate::http::{Answer, HttpClient};
use crate::process::{capture_lines, wait_for_line};

/// A running console; killed when dropped.
pub struct Console {
    child: Child,
    logs: Arc<Mutex<Vec<String>>>,
    base: String,
}

impl Console {
    /// `inboundctl console --listen 127.0.0.1:0 args…` on `database_url`.
    pub fn start(database_url: &str, args: &[&str]) -> Self {
        let mut command_args = vec!["console", "--listen", "127.0.0.1:0"];
        command_args.extend(args);
        let mut child = Inboundctl::new()
            .database(database_url)
            .command(&command_args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start inboundctl console");
        let stdout = capture_lines(child.stdout.take().expect("stdout"));
        let logs = capture_lines(child.stderr.take().expect("stderr"));
        let line = wait_for_line(
            &mut child,
            &stdout,
            "console listening on ",
            Duration::from_secs(20),
        )
        .unwrap_or_else(|lines| {
            panic!(
                "the console did not start: {lines:?} {:?}",
                logs.lock().expect("log lock")
            )
        });
        let base = line
            .split("console listening on ")
            .nth(1)
            .expect("an address")
            .trim()
            .to_owned();
        Self { child, logs, base }
    }

    /// The console's URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `http://127.0.0.1:PORT`, as a browser sends it in `Origin`.
    pub fn origin(&self) -> &str {
        &self.base
    }

    /// What it logged so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().expect("log lock").clone()
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// A browser-like session: the console's cookie, sent back with every request.
pub struct Session<'c> {
    console: &'c Console,
    client: HttpClient,
    cookie: String,
}

impl<'c> Session<'c> {
    /// Opens the overview and keeps the session cookie it sets.
    pub async fn open(console: &'c Console) -> Self {
        let client = HttpClient::new();
        let first = client.get(&console.url("/")).await.expect("the overview");
        let cookie = first
            .headers
            .get("set-cookie")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .expect("a session cookie")
            .to_owned();
        Self {
            console,
            client,
            cookie,
        }
    }

    /// `GET path` in this session.
    pub async fn get(&self, path: &str) -> Answer {
        self.client
            .send(
                "GET",
                &self.console.url(path),
                &[("cookie".to_owned(), self.cookie.clone())],
                Bytes::new(),
            )
            .await
            .expect("an answer")
    }

    /// The form token on the page at `path` (`None`: the page offers no decision).
    pub async fn token(&self, path: &str) -> Option<String> {
        form_token(&text(&self.get(path).await))
    }

    /// POSTs `fields` to `path` from the console's own origin.
    pub async fn post(&self, path: &str, fields: &[(&str, &str)]) -> Answer {
        self.post_from(Some(self.console.origin()), path, fields)
            .await
    }

    /// Presses the button of the form `form_id` on `page` (its hidden fields as they are).
    pub async fn submit(&self, page: &Answer, form_id: &str) -> Answer {
        let (action, fields) = form_of(&text(page), form_id)
            .unwrap_or_else(|| panic!("no form {form_id}: {}", text(page)));
        let fields: Vec<(&str, &str)> = fields
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        self.post(&action, &fields).await
    }

    /// POSTs `fields` to `path` with `origin` (`None`: no `Origin` header).
    pub async fn post_from(
        &self,
        origin: Option<&str>,
        path: &str,
        fields: &[(&str, &str)],
    ) -> Answer {
        let mut headers = vec![
            ("cookie".to_owned(), self.cookie.clone()),
            (
                "content-type".to_owned(),
                "application/x-www-form-urlencoded".to_owned(),
            ),
        ];
        if let Some(origin) = origin {
            headers.push(("origin".to_owned(), origin.to_owned()));
        }
        self.client
            .post(&self.console.url(path), &headers, form(fields))
            .await
            .expect("an answer")
    }
}

/// `fields` form-encoded.
pub fn form(fields: &[(&str, &str)]) -> String {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (name, value) in fields {
        serializer.append_pair(name, value);
    }
    serializer.finish()
}

/// A page's body as text.
pub fn text(answer: &Answer) -> String {
    String::from_utf8_lossy(&answer.body).into_owned()
}

/// The value of the first `name="csrf"` field of `html`.
pub fn form_token(html: &str) -> Option<String> {
    hidden_value(html, "csrf")
}

/// The value of the first hidden field named `name` in `html`.
pub fn hidden_value(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')?;
    Some(unescape(&html[start..start + end]))
}

/// Text as the templates escape it, unescaped (what a browser submits).
fn unescape(text: &str) -> String {
    text.replace("&#60;", "<")
        .replace("&#62;", ">")
        .replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&#38;", "&")
}

/// The action and the hidden fields of the form `id="{form_id}"` in `html`: what the
/// browser posts when its button is pressed.
pub fn form_of(html: &str, form_id: &str) -> Option<(String, Vec<(String, String)>)> {
    let start = html.find(&format!("id=\"{form_id}\""))?;
    let opening = html[..start].rfind("<form")?;
    let end = opening + html[opening..].find("</form>")?;
    let form = &html[opening..end];
    let action = form.split("action=\"").nth(1)?.split('"').next()?;
    let fields = form
        .split("<input type=\"hidden\" ")
        .skip(1)
        .filter_map(|input| {
            let name = input.split("name=\"").nth(1)?.split('"').next()?;
            let value = input.split("value=\"").nth(1)?.split('"').next()?;
            Some((unescape(name), unescape(value)))
        })
        .collect();
    Some((unescape(action), fields))
}
