//! A small W3C WebDriver client (the protocol is JSON over HTTP) that drives Debian's
//! headless Chromium through its chromedriver, for the dashboard's browser tests.
//! (A WebDriver crate was tried: its dependencies turn on a `syn` feature that makes
//! cargo rebuild RocksDB's bindings whenever tests and the server are built in turn.)

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine as _;
use reqwest::blocking::Client;
use serde_json::{json, Value};

/// Chromium and its driver, as Debian's `chromium` and `chromium-driver` install them.
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The key WebDriver names an element reference by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long `find` and `wait_for` wait.
pub const PATIENCE: Duration = Duration::from_secs(15);

pub struct Browser {
    driver: Child,
    /// `http://127.0.0.1:PORT/session/ID`
    session: String,
    client: Client,
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium of `width` × `height`.
    pub fn start(width: u32, height: u32) -> Browser {
        for path in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(path).is_file(),
                "{path} is missing: tools/setup.sh installs Debian's chromium and chromium-driver"
            );
        }
        // Bound by the driver after this picks it: a port nothing else takes meanwhile.
        let port = super::owned_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let client = Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + PATIENCE;
        while client.get(format!("{base}/status")).send().is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start on port {port}");
            thread::sleep(Duration::from_millis(100));
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         format!("--window-size={width},{height}")],
            },
        }}});
        let reply: Value = client
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .and_then(|reply| reply.json())
            .expect("a WebDriver session");
        let id = reply["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {reply}"))
            .to_owned();
        Browser {
            driver,
            session: format!("{base}/session/{id}"),
            client,
        }
    }

    /// One WebDriver command; its `value`. A WebDriver error fails the test.
    fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.client.request(method.clone(), format!("{}{path}", self.session));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let reply: Value = request
            .send()
            .and_then(|reply| reply.json())
            .unwrap_or_else(|error| panic!("WebDriver {method} {path}: {error}"));
        if let Some(error) = reply["value"]["error"].as_str() {
            panic!("WebDriver {method} {path}: {error}: {}", reply["value"]["message"]);
        }
        reply["value"].clone()
    }

    pub fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({ "url": url })));
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page; its result.
    pub fn script(&self, script: &str, args: Value) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// The element `css` selects, waiting for it to exist and be displayed (laid out,
    /// or a `display: contents` box inside no hidden ancestor).
    pub fn find(&self, css: &str) -> String {
        self.wait_for(&format!("{css} to be shown"), |browser| {
            let found = browser.script(
                "const e = document.querySelector(arguments[0]); \
                 if (!e || e.closest('[hidden]')) return null; \
                 const shown = e.getClientRects().length > 0 || getComputedStyle(e).display === 'contents'; \
                 return shown ? e : null;",
                json!([css]),
            );
            found[ELEMENT].as_str().map(str::to_owned)
        })
    }

    /// Polls `probe` until it answers, for at most [`PATIENCE`].
    pub fn wait_for<T>(&self, what: &str, probe: impl Fn(&Browser) -> Option<T>) -> T {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(found) = probe(self) {
                return found;
            }
            assert!(Instant::now() < deadline, "waited {PATIENCE:?} for {what}");
            thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn click(&self, css: &str) {
        let element = self.find(css);
        self.command(
            reqwest::Method::POST,
            &format!("/element/{element}/click"),
            Some(json!({})),
        );
    }

    /// Clears the field `css` selects and types `text` into it.
    pub fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css);
        self.command(
            reqwest::Method::POST,
            &format!("/element/{element}/clear"),
            Some(json!({})),
        );
        self.command(
            reqwest::Method::POST,
            &format!("/element/{element}/value"),
            Some(json!({ "text": text })),
        );
    }

    /// Chooses `value` in the `<select>` `css` selects, as a user would (a change event).
    pub fn select(&self, css: &str, value: &str) {
        self.find(css);
        let chosen = self.script(
            "const s = document.querySelector(arguments[0]); \
             if (![...s.options].some(o => o.value === arguments[1])) return false; \
             s.value = arguments[1]; s.dispatchEvent(new Event('change', {bubbles: true})); return true;",
            json!([css, value]),
        );
        assert_eq!(chosen, json!(true), "{css} has no option {value:?}");
    }

    /// The visible text of what `css` selects ("" when it is not there).
    pub fn text(&self, css: &str) -> String {
        self.script(
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';",
            json!([css]),
        )
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// Accepts the page's `confirm()`.
    pub fn accept_dialog(&self) {
        self.wait_for("a dialog", |browser| {
            let reply: Value = browser
                .client
                .post(format!("{}/alert/accept", browser.session))
                .json(&json!({}))
                .send()
                .ok()?
                .json()
                .ok()?;
            reply["value"]["error"].is_null().then_some(())
        });
    }

    pub fn set_size(&self, width: u32, height: u32) {
        self.command(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        );
    }

    /// A PNG of the viewport, written to `path`.
    pub fn screenshot(&self, path: &Path) {
        let encoded = self.command(reqwest::Method::GET, "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().expect("base64 PNG"))
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.client.delete(&self.session).send();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
