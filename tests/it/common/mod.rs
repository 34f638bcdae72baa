//! Black-box harness for the integration tests: runs the real `rankstream`
//! binary as a subprocess on `127.0.0.1:0` with a fresh RocksDB directory and
//! talks to it over HTTP, exactly as a client would (see notes/CONTRACT.md).
//!
//! Every test starts its own [`TestServer`]; tests run in parallel, so nothing
//! here uses fixed ports or shared directories.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use reqwest::blocking::{Body, Client};
use reqwest::header::HeaderMap;
pub use reqwest::{Method, StatusCode};
pub use serde_json::{json, Value};
use tempfile::TempDir;

mod checks;
pub use checks::*;
pub mod cluster;
mod events;
pub use events::*;
pub mod kafka;
pub mod movielens;
pub mod webdriver;

/// A per-key rate and burst no test's load reaches.
pub const UNTHROTTLED: [(&str, &str); 2] = [
    ("RANKSTREAM__AUTH__DEFAULT_RATE_PER_SEC", "1000000"),
    ("RANKSTREAM__AUTH__DEFAULT_BURST", "1000000"),
];

/// How long a server may take to print its listening line.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to exit after SIGTERM before it is SIGKILLed.
const EXIT_TIMEOUT: Duration = Duration::from_secs(60);
/// The line the server prints once it accepts connections.
const LISTENING_PREFIX: &str = "rankstream listening on ";
/// Lines of server output kept for failure messages.
const KEPT_OUTPUT_LINES: usize = 400;

/// Every scope of the contract (admin implies all the others).
pub use rankstream::domain::api_key::SCOPES as ALL_SCOPES;

/// Held by a test that loads both cores for minutes (a cluster under load, a fuzzer):
/// such tests run one at a time, beside light ones only, so that a test with a time
/// bound measures what it tests rather than a neighbour's load (two clusters under load
/// at once made a takeover take 22-25 s instead of 13-15 s on the failover branch).
pub fn heavy_test() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: Mutex<()> = Mutex::new(());
    HEAVY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A port on 127.0.0.1 that this test process owns for its whole run, for a process the
/// test starts on a port it names itself and may restart on it (a cluster's node, a
/// broker, a browser driver). A port the kernel hands out for `127.0.0.1:0` can go to
/// any other socket once the process that held it dies (a server another test starts,
/// a client's outgoing connection), so these come from below the kernel's ephemeral
/// range, which nothing here binds by chance, and none is handed out twice.
pub fn owned_port() -> u16 {
    static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_low.max(10_001));
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let start = (std::process::id() as u64 * 7_919 + handed_out.len() as u64 * 104_729) % u64::from(high - low);
    for offset in 0..u64::from(high - low) {
        let port = low + ((start + offset) % u64::from(high - low)) as u16;
        if !handed_out.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            handed_out.push(port);
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 in {low}..{high}");
}

/// A tool of the workspace's `rankstream-tools` package (`tools/`), which cargo puts beside
/// the server's binary: `cargo test` at the workspace root builds every tool (the
/// package's own test runs each one).
pub fn tool_binary(name: &str) -> PathBuf {
    let binary = Path::new(env!("CARGO_BIN_EXE_rankstream")).with_file_name(name);
    assert!(
        binary.is_file(),
        "{} is not built: run the tests with `cargo test` at the workspace root, or build it with `cargo build --release -p rankstream-tools`",
        binary.display()
    );
    binary
}

/// Catalog routes without path parameters.
pub const ITEM: &str = "/v1/catalog/item";
pub const ITEMS: &str = "/v1/catalog/items";
pub const TABLE: &str = "/v1/catalog/table";

/// `/v1/catalog/item/{table}/{id}`
pub fn item_path(table: &str, id: &str) -> String {
    format!("/v1/catalog/item/{table}/{id}")
}

/// How a request carries its API key.
#[derive(Clone, Copy, Debug)]
pub enum Auth<'a> {
    None,
    /// `Authorization: Bearer <key>`
    Bearer(&'a str),
    /// `X-API-Key: <key>`
    ApiKey(&'a str),
}

/// A request body.
pub enum Payload {
    Empty,
    /// Serialized JSON with `Content-Type: application/json` and a Content-Length.
    Json(Value),
    /// Raw bytes with a Content-Length; set the content type through the headers.
    Bytes(Vec<u8>),
    /// Raw bytes streamed with `Transfer-Encoding: chunked` (no Content-Length).
    Chunked(Vec<u8>),
}

/// A response: status, headers and the body parsed as JSON (`Value::Null` if it is not JSON).
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|value| value.to_str().expect("header is not ASCII").to_string())
    }

    pub fn pair(self) -> (StatusCode, Value) {
        (self.status, self.body)
    }
}

/// The `rankstream serve` process under test.
pub struct TestServer {
    /// `http://IP:PORT` read from the listening line; changes on every (re)start.
    pub base_url: String,
    /// Secret passed as `RANKSTREAM_ADMIN_KEY`: a valid admin key, kept across restarts.
    pub admin_key: String,
    /// Holds the data directory (`data`) and the default backup directory beside it
    /// (`data-backups`); lives as long as the server value and is reused by `restart`.
    pub data_dir: Arc<TempDir>,
    /// The node's `--data-dir`, inside `data_dir`.
    data_path: PathBuf,
    /// The running process; `None` after `stop` or `kill`.
    pub child: Option<Child>,
    /// Extra environment (config overrides) applied on every start.
    env: Vec<(String, String)>,
    /// Extra `serve` arguments (e.g. `--config FILE`) applied on every start.
    args: Vec<String>,
    /// HTTP client shared by all requests of the test (no proxy, 60 s timeout).
    client: Client,
    /// Last lines of stdout and stderr of every start, for failure messages.
    output: Arc<Mutex<VecDeque<String>>>,
}

impl TestServer {
    pub fn start() -> TestServer {
        TestServer::start_with_env(&[])
    }

    /// Starts a server whose keys are not rate limited (tests that load it).
    pub fn start_unthrottled() -> TestServer {
        TestServer::start_with_env(&UNTHROTTLED)
    }

    /// Starts a server with extra environment, e.g. `("RANKSTREAM__SERVER__BODY_LIMIT_BYTES", "1024")`.
    pub fn start_with_env(env: &[(&str, &str)]) -> TestServer {
        TestServer::start_with(env, &[])
    }

    /// Starts a server with extra environment and extra `serve` arguments.
    pub fn start_with(env: &[(&str, &str)], args: &[&str]) -> TestServer {
        let data_dir = Arc::new(
            tempfile::Builder::new()
                .prefix("rankstream-test-")
                .tempdir()
                .expect("create temp data dir"),
        );
        let mut server = TestServer {
            base_url: String::new(),
            admin_key: random_secret(),
            data_path: data_dir.path().join("data"),
            data_dir,
            child: None,
            env: env
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
            args: args.iter().map(|arg| arg.to_string()).collect(),
            client: Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("build http client"),
            output: Arc::new(Mutex::new(VecDeque::new())),
        };
        server.spawn();
        server
    }

    pub fn data_path(&self) -> &Path {
        &self.data_path
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The last lines the server printed (stdout and stderr interleaved).
    pub fn output(&self) -> String {
        let lines = self.output.lock().unwrap();
        lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Graceful stop: SIGTERM, wait for the exit, assert exit code 0.
    pub fn stop(&mut self) {
        let mut child = self.child.take().expect("server is not running");
        let pid = child.id().to_string();
        let kill = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill -TERM");
        assert!(kill.success(), "kill -TERM {pid} failed");
        let (status, timed_out) = wait_with_deadline(&mut child, EXIT_TIMEOUT);
        assert!(
            !timed_out,
            "server did not exit within {EXIT_TIMEOUT:?} of SIGTERM; output:\n{}",
            self.output()
        );
        assert!(
            status.success(),
            "server exited with {status} after SIGTERM (expected 0); output:\n{}",
            self.output()
        );
    }

    /// The server process's resident memory, in KiB (from `/proc`).
    pub fn rss_kib(&self) -> u64 {
        let pid = self.child.as_ref().expect("server is running").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the server's /proc status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc status")
    }

    /// Crash: SIGKILL, no chance to flush anything.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("server is not running");
        child.kill().expect("SIGKILL the server");
        child.wait().expect("wait for the killed server");
    }

    /// Starts again on the same data dir with the same admin key and environment;
    /// a server still running is stopped gracefully first.
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
        self.spawn();
    }

    fn spawn(&mut self) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rankstream"));
        command.arg("serve");
        // A node of a cluster listens where its topology says (its args bring --bind).
        if !self.args.iter().any(|arg| arg == "--bind") {
            command.args(["--bind", "127.0.0.1:0"]);
        }
        command
            .arg("--data-dir")
            .arg(&self.data_path)
            .args(&self.args)
            .env("RANKSTREAM_ADMIN_KEY", &self.admin_key)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Tests embed with the built-in hashed embedder (fast, and what their expectations
        // are written for) unless they name a model: the default would load MiniLM.
        command.env("RANKSTREAM__EMBED__MODEL_DIR", "");
        for (name, value) in &self.env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("spawn the rankstream binary");
        let (lines_sender, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        drain(stdout, self.output.clone(), Some(lines_sender));
        let stderr_drain = drain(stderr, self.output.clone(), None);

        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            let failure = match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => match line.trim().strip_prefix(LISTENING_PREFIX) {
                    Some(url) if url.starts_with("http://") => {
                        self.base_url = url.trim_end_matches('/').to_string();
                        self.child = Some(child);
                        return;
                    }
                    _ => continue,
                },
                Err(RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    format!("no listening line within {STARTUP_TIMEOUT:?}")
                }
                Err(RecvTimeoutError::Disconnected) => "stdout closed before the listening line".to_string(),
            };
            let status = child.wait().expect("wait for the failed server");
            let _ = stderr_drain.join();
            panic!(
                "rankstream serve failed to start: {failure} ({status}); output:\n{}",
                self.output()
            );
        }
    }

    // ---- requests -------------------------------------------------------

    /// Sends any request; panics (with the server output) only on transport errors.
    pub fn send(&self, method: Method, path: &str, auth: Auth, payload: Payload, headers: &[(&str, &str)]) -> Reply {
        let mut request = self
            .client
            .request(method.clone(), format!("{}{}", self.base_url, path));
        request = match auth {
            Auth::None => request,
            Auth::Bearer(key) => request.header("authorization", format!("Bearer {key}")),
            Auth::ApiKey(key) => request.header("x-api-key", key),
        };
        request = match payload {
            Payload::Empty => request,
            Payload::Json(value) => request
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&value).unwrap()),
            Payload::Bytes(bytes) => request.body(bytes),
            Payload::Chunked(bytes) => request.body(Body::new(std::io::Cursor::new(bytes))),
        };
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request
            .send()
            .unwrap_or_else(|error| panic!("{method} {path}: {error:?}\nserver output:\n{}", self.output()));
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .bytes()
            .unwrap_or_else(|error| panic!("{method} {path}: reading body: {error:?}"));
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply { status, headers, body }
    }

    pub fn get(&self, path: &str, key: &str) -> (StatusCode, Value) {
        self.send(Method::GET, path, Auth::Bearer(key), Payload::Empty, &[])
            .pair()
    }

    pub fn delete(&self, path: &str, key: &str) -> (StatusCode, Value) {
        self.send(Method::DELETE, path, Auth::Bearer(key), Payload::Empty, &[])
            .pair()
    }

    pub fn put(&self, path: &str, key: &str, body: Value) -> (StatusCode, Value) {
        self.send(Method::PUT, path, Auth::Bearer(key), Payload::Json(body), &[])
            .pair()
    }

    pub fn post(&self, path: &str, key: &str, body: Value) -> (StatusCode, Value) {
        self.send(Method::POST, path, Auth::Bearer(key), Payload::Json(body), &[])
            .pair()
    }

    /// Raw body bytes with a Content-Length and the given content type.
    pub fn raw(&self, method: Method, path: &str, key: &str, body: &[u8], content_type: &str) -> (StatusCode, Value) {
        let headers = [("content-type", content_type)];
        self.send(method, path, Auth::Bearer(key), Payload::Bytes(body.to_vec()), &headers)
            .pair()
    }

    /// Same as `get` etc. with the admin key.
    pub fn admin_get(&self, path: &str) -> (StatusCode, Value) {
        self.get(path, &self.admin_key)
    }

    pub fn admin_put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.put(path, &self.admin_key, body)
    }

    pub fn admin_post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.post(path, &self.admin_key, body)
    }

    pub fn admin_patch(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(
            Method::PATCH,
            path,
            Auth::Bearer(&self.admin_key),
            Payload::Json(body),
            &[],
        )
        .pair()
    }

    pub fn admin_delete(&self, path: &str) -> (StatusCode, Value) {
        self.delete(path, &self.admin_key)
    }

    /// The `fields` map (name -> type) of a table record, asserting the table exists.
    #[track_caller]
    pub fn table_fields(&self, table: &str) -> Value {
        let reply = self.admin_get(&format!("{TABLE}/{table}"));
        assert_status(&reply, 200, &format!("get table {table}"))["fields"].clone()
    }

    // ---- keys -----------------------------------------------------------

    /// Creates a key through `POST /v1/admin/keys` (asserting 201) and returns the
    /// whole record. `extra` fields (name, expires_at, rate_per_sec, ...) are merged in.
    pub fn create_key_record(&self, scopes: &[&str], extra: Value) -> Value {
        let mut body = json!({"name": "test-key", "scopes": scopes});
        if let Value::Object(extra) = extra {
            body.as_object_mut().unwrap().extend(extra);
        }
        let reply = self.admin_post("/v1/admin/keys", body.clone());
        assert_status(&reply, 201, &format!("create key {body}"));
        reply.1
    }

    /// Creates a key and returns its secret.
    pub fn create_key(&self, scopes: &[&str], extra: Value) -> String {
        let record = self.create_key_record(scopes, extra);
        record["key"]
            .as_str()
            .expect("created key has a string secret")
            .to_string()
    }

    /// Runs `rankstream keys <subcommand> --data-dir DIR <args>` (server must be
    /// stopped) and returns its stdout parsed as JSON.
    pub fn keys_cli(&self, subcommand: &str, args: &[&str]) -> Value {
        assert!(self.child.is_none(), "stop the server before running the keys CLI");
        let output = Command::new(env!("CARGO_BIN_EXE_rankstream"))
            .args(["keys", subcommand, "--data-dir"])
            .arg(&self.data_path)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run rankstream keys");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "keys {subcommand} {args:?} exited with {}\nstdout: {stdout}\nstderr: {stderr}",
            output.status
        );
        serde_json::from_str(stdout.trim())
            .unwrap_or_else(|error| panic!("keys {subcommand} printed non-JSON ({error}): {stdout}\nstderr: {stderr}"))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Reads `stream` line by line until EOF, keeping the last lines in `log` and
/// forwarding them to `lines_to` while someone listens. Never stops early, so the
/// server can never block on a full pipe.
fn drain(
    stream: impl Read + Send + 'static,
    log: Arc<Mutex<VecDeque<String>>>,
    lines_to: Option<mpsc::Sender<String>>,
) -> JoinHandle<()> {
    thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buffer = Vec::new();
        loop {
            buffer.clear();
            match reader.read_until(b'\n', &mut buffer) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&buffer).trim_end().to_string();
            {
                let mut log = log.lock().unwrap();
                if log.len() >= KEPT_OUTPUT_LINES {
                    log.pop_front();
                }
                log.push_back(line.clone());
            }
            if let Some(sender) = &lines_to {
                let _ = sender.send(line);
            }
        }
    })
}

/// Waits for `child`, SIGKILLing it if it is still alive after `timeout`.
/// Returns the exit status and whether the deadline fired.
fn wait_with_deadline(child: &mut Child, timeout: Duration) -> (ExitStatus, bool) {
    let pid = child.id().to_string();
    let (exited, exited_signal) = mpsc::channel::<()>();
    let fired = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let fired = fired.clone();
        thread::spawn(move || {
            if let Err(RecvTimeoutError::Timeout) = exited_signal.recv_timeout(timeout) {
                fired.store(true, Ordering::SeqCst);
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
            }
        })
    };
    let status = child.wait().expect("wait for the server");
    let _ = exited.send(());
    let _ = watchdog.join();
    (status, fired.load(Ordering::SeqCst))
}

fn random_secret() -> String {
    let state = std::collections::hash_map::RandomState::new();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "test-admin-{:016x}{:016x}{:08x}",
        state.hash_one(nanos),
        state.hash_one(std::process::id()),
        state.hash_one(thread::current().id()) as u32
    )
}

/// A key record's scopes, sorted, for order-free comparison.
pub fn sorted_scopes(key: &Value) -> Vec<&str> {
    let mut scopes: Vec<&str> = key["scopes"]
        .as_array()
        .unwrap_or_else(|| panic!("no scopes in {key}"))
        .iter()
        .map(|s| s.as_str().expect("scope strings"))
        .collect();
    scopes.sort();
    scopes
}

/// The MiniLM directory `tools/setup.sh` fills; panics (fails the test) when absent.
pub fn minilm_dir() -> String {
    let models = std::env::var("RANKSTREAM_MODELS").unwrap_or_else(|_| {
        let home = std::env::var("HOME").expect("HOME is set");
        format!("{home}/.cache/rankstream/models")
    });
    let dir = std::path::PathBuf::from(models).join("all-MiniLM-L6-v2");
    for file in ["config.json", "tokenizer.json", "model.safetensors"] {
        assert!(
            dir.join(file).is_file(),
            "{} is missing: run tools/setup.sh (or tools/fetch-model.sh) to fetch the MiniLM model",
            dir.join(file).display()
        );
    }
    dir.to_string_lossy().into_owned()
}
