//! A real browser for the console's tests: Debian's headless `chromium` driven through
//! `chromedriver` (WebDriver) by fantoccini. Each [`Browser`] starts its own chromedriver on
//! a free port with a fresh profile, and kills it when dropped. Screenshots go to
//! `target/console-screenshots/` (docs/console.md shows the best of them).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;

/// A browser session and the chromedriver serving it.
pub struct Browser {
    client: Option<Client>,
    driver: Child,
}

/// Where chromium and chromedriver are (Debian's packages; `.ci/run` installs them).
fn installed(name: &str) -> PathBuf {
    for dir in ["/usr/bin", "/usr/local/bin", "/usr/lib/chromium"] {
        let path = PathBuf::from(dir).join(name);
        if path.exists() {
            return path;
        }
    }
    panic!("{name} is not installed: apt-get install chromium chromium-driver (.ci/run does)");
}

impl Browser {
    /// Starts chromedriver and a headless chromium session.
    pub async fn start() -> Self {
        let port = crate::ports::free_port();
        let driver = Command::new(installed("chromedriver"))
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            serde_json::json!({
                "binary": installed("chromium"),
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1400,1000", "--no-first-run", "--disable-extensions",
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let started = std::time::Instant::now();
        let client = loop {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(error) if started.elapsed() > Duration::from_secs(30) => {
                    panic!("no browser session within 30 s: {error}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        Self {
            client: Some(client),
            driver,
        }
    }

    /// The WebDriver client.
    pub fn client(&self) -> &Client {
        self.client.as_ref().expect("an open session")
    }

    /// Opens `url`.
    pub async fn open(&self, url: &str) {
        self.client().goto(url).await.expect("navigate");
    }

    /// The element `css` selects, waited for up to 10 s (a click may still be loading the
    /// next page); the panic says what the page shows instead.
    pub async fn element(&self, css: &str) -> Element {
        match self
            .client()
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Css(css))
            .await
        {
            Ok(element) => element,
            Err(error) => {
                let page = match self.client().find(Locator::Css("body")).await {
                    Ok(body) => body.text().await.unwrap_or_default(),
                    Err(_) => String::new(),
                };
                panic!("{css}: {error}; the page says: {page}")
            }
        }
    }

    /// The text of the element `css` selects.
    pub async fn text_of(&self, css: &str) -> String {
        self.element(css).await.text().await.expect("its text")
    }

    /// Types `text` into the field `css` selects.
    pub async fn type_into(&self, css: &str, text: &str) {
        let field = self.element(css).await;
        field.clear().await.ok();
        field.send_keys(text).await.expect("typed");
    }

    /// Clicks the element `css` selects.
    pub async fn click(&self, css: &str) {
        self.element(css).await.click().await.expect("clicked");
    }

    /// How many elements `css` selects.
    pub async fn count(&self, css: &str) -> usize {
        self.client()
            .find_all(Locator::Css(css))
            .await
            .expect("a search")
            .len()
    }

    /// Whether a JavaScript dialog (alert, confirm, prompt) is open.
    pub async fn dialog_open(&self) -> bool {
        self.client().get_alert_text().await.is_ok()
    }

    /// Saves a PNG of the window as `target/console-screenshots/{name}.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client().screenshot().await.expect("a screenshot");
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots");
        std::fs::create_dir_all(&dir).expect("screenshot directory");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("screenshot written");
        path
    }

    /// Ends the session and the driver.
    pub async fn close(mut self) {
        if let Some(client) = self.client.take() {
            client.close().await.ok();
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.driver.kill().ok();
        self.driver.wait().ok();
    }
}
