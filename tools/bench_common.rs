//! Pieces shared by the benchmark tools (`bench-*`, `eval-offline`), included by
//! each with `#[path = "bench_common.rs"] mod bench_common;`: a keep-alive HTTP/1.1
//! client, a spawned `rankstream serve` (killed, and its temp dir removed, if the tool is
//! interrupted), percentiles and medians, and the writer of a tool's section of
//! BENCHMARKS.md.
#![allow(dead_code)] // each tool uses a different part of it

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use rand::Rng;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;

/// Where the requests go.
pub struct Target {
    /// `host:port`, for connecting and the Host header.
    pub authority: String,
    /// Path prefix of the base URL, without a trailing slash.
    pub base_path: String,
    pub key: String,
}

impl Target {
    pub fn parse(url: &str, key: String) -> Result<Target> {
        let uri: Uri = url.parse().with_context(|| format!("bad url {url:?}"))?;
        ensure!(
            uri.scheme_str() == Some("http"),
            "only http:// urls are supported: {url}"
        );
        let authority = uri.authority().context("url has no host")?;
        let port = authority.port_u16().unwrap_or(80);
        let base_path = uri.path().trim_end_matches('/').to_string();
        Ok(Target {
            authority: format!("{}:{port}", authority.host()),
            base_path,
            key,
        })
    }

    /// Opens one HTTP/1.1 keep-alive connection.
    pub async fn connect(&self) -> Result<SendRequest<Full<Bytes>>> {
        let stream = TcpStream::connect(&self.authority)
            .await
            .with_context(|| format!("connecting to {}", self.authority))?;
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        Ok(sender)
    }

    /// Sends one authenticated request (a body only with a content type) and returns
    /// its status and whole body.
    pub async fn send(
        &self,
        sender: &mut SendRequest<Full<Bytes>>,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<(StatusCode, Bytes)> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base_path))
            .header(HOST, &self.authority)
            .header(AUTHORIZATION, format!("Bearer {}", self.key));
        if let Some(content_type) = content_type {
            request = request.header(CONTENT_TYPE, content_type);
        }
        sender.ready().await?;
        let response = sender.send_request(request.body(Full::new(body))?).await?;
        let status = response.status();
        Ok((status, response.into_body().collect().await?.to_bytes()))
    }

    /// `GET path` without a body.
    pub async fn get(&self, sender: &mut SendRequest<Full<Bytes>>, path: &str) -> Result<(StatusCode, Bytes)> {
        self.send(sender, Method::GET, path, None, Bytes::new()).await
    }
}

/// The rankstream binary: `explicit`, else `rankstream` next to this executable.
pub fn server_binary(explicit: Option<&PathBuf>) -> Result<PathBuf> {
    Ok(match explicit {
        Some(binary) => binary.clone(),
        None => std::env::current_exe()?.with_file_name("rankstream"),
    })
}

/// A fresh random admin secret (48 hex digits).
pub fn generate_key() -> String {
    let secret: [u8; 24] = rand::rng().random();
    secret.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Servers this tool started and has not stopped yet, by pid, with their temp dirs.
static RUNNING: parking_lot::Mutex<Vec<(u32, PathBuf)>> = parking_lot::Mutex::new(Vec::new());
static CLEAN_UP_ON_SIGNAL: Once = Once::new();

/// When the tool is interrupted (SIGINT, SIGTERM, SIGHUP), kills the servers it started
/// and removes their temp dirs (each holds a RocksDB) before exiting, instead of leaving
/// them running and on disk. Must be called inside the tokio runtime; once is enough.
fn clean_up_on_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    CLEAN_UP_ON_SIGNAL.call_once(|| {
        let kinds = [
            (SignalKind::interrupt(), 130),
            (SignalKind::terminate(), 143),
            (SignalKind::hangup(), 129),
        ];
        for (kind, code) in kinds {
            let Ok(mut received) = signal(kind) else { continue };
            tokio::spawn(async move {
                received.recv().await;
                for (pid, dir) in RUNNING.lock().drain(..) {
                    eprintln!("interrupted: killing server {pid} and removing {}", dir.display());
                    std::process::Command::new("kill")
                        .args(["-KILL", &pid.to_string()])
                        .status()
                        .ok();
                    // A killed process closes its files at once; give it a moment.
                    std::thread::sleep(Duration::from_millis(100));
                    std::fs::remove_dir_all(&dir).ok();
                }
                std::process::exit(code);
            });
        }
    });
}

/// A server this tool started: stopped with SIGTERM, killed if dropped on an error path
/// (its temp dir is kept then, for its log) or if the tool is interrupted (dir removed).
pub struct SpawnedServer {
    child: tokio::process::Child,
    pid: Option<u32>,
    /// Holds `data/` and `server.log` (the server's stderr).
    pub dir: PathBuf,
}

impl SpawnedServer {
    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Starts `binary serve --bind 127.0.0.1:0` on a fresh data dir with `admin_key` as
    /// RANKSTREAM_ADMIN_KEY and durability sync, plus `extra_args` and `extra_env`, and
    /// returns it with its `http://IP:PORT` URL (from its `rankstream listening on` line).
    pub async fn start(
        binary: &Path,
        admin_key: &str,
        extra_args: &[OsString],
        extra_env: &[(&str, &str)],
    ) -> Result<(SpawnedServer, String)> {
        let unique = uuid::Uuid::now_v7().simple();
        let dir = std::env::temp_dir().join(format!("rankstream-bench-{unique}"));
        std::fs::create_dir_all(&dir)?;
        let log_path = dir.join("server.log");
        let mut child = tokio::process::Command::new(binary)
            .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(dir.join("data"))
            .args(extra_args)
            .env("RANKSTREAM_ADMIN_KEY", admin_key)
            .env("RANKSTREAM__STORAGE__DURABILITY", "sync")
            .envs(extra_env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&log_path)?)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {} (cargo build --release?)", binary.display()))?;
        clean_up_on_signal();
        let pid = child.id();
        if let Some(pid) = pid {
            RUNNING.lock().push((pid, dir.clone()));
        }
        let mut lines = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        let listening = async {
            while let Some(line) = lines.next_line().await? {
                if let Some(url) = line.strip_prefix("rankstream listening on ") {
                    return Ok(url.trim().to_string());
                }
            }
            bail!("server exited before listening; see {}", log_path.display())
        };
        let url = tokio::time::timeout(Duration::from_secs(60), listening)
            .await
            .with_context(|| format!("server not listening after 60 s; see {}", log_path.display()))??;
        // Keep draining stdout so that the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok((SpawnedServer { child, pid, dir }, url))
    }

    /// SIGTERM, wait for a clean exit, remove the temp dir (kept when the exit was not clean).
    pub async fn stop(mut self) -> Result<()> {
        if let Some(pid) = self.child.id() {
            std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()?;
        }
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .context("server still running 60 s after SIGTERM")??;
        if status.success() {
            std::fs::remove_dir_all(&self.dir).ok();
        } else {
            eprintln!("warning: server exited with {status}; see {}", self.dir.display());
        }
        Ok(())
    }
}

impl Drop for SpawnedServer {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            RUNNING.lock().retain(|(running, _)| *running != pid);
        }
    }
}

/// Nearest-rank percentile (`fraction` in 0..=1).
pub fn percentile(values: &[f64], fraction: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (fraction * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.clamp(1, sorted.len().max(1)) - 1)
        .copied()
        .unwrap_or(f64::NAN)
}

pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() % 2 {
        0 => (sorted[middle - 1] + sorted[middle]) / 2.0,
        _ => sorted[middle],
    }
}

/// `123456.7` -> `"123,457"`.
pub fn thousands(value: f64) -> String {
    let digits = format!("{value:.0}");
    let mut out = String::new();
    for (position, digit) in digits.chars().enumerate() {
        if position > 0 && (digits.len() - position) % 3 == 0 && digit.is_ascii_digit() {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The current UTC time as RFC 3339 to the second, for "Measured ..." lines.
pub fn utc_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The command line this tool was started with.
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// `"2 CPUs (model), 23.5 GiB RAM"`, from the OS.
pub fn machine_description() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name")?.split(':').nth(1))
        .map_or(String::new(), |model| format!(" ({})", model.trim()));
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_kib: f64 = meminfo
        .lines()
        .find_map(|line| {
            line.strip_prefix("MemTotal:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0);
    format!("{cpus} CPUs{model}, {:.1} GiB RAM", memory_kib / 1024.0 / 1024.0)
}

/// Clock ticks per second of `/proc` CPU times (USER_HZ, fixed at 100 on Linux).
const USER_HZ: f64 = 100.0;

/// The name and the CPU time (user + system, seconds) of a `/proc/.../stat` file: a
/// process's (all its threads, exited ones included) or one thread's.
fn stat_cpu(path: &Path) -> Option<(String, f64)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let name = stat.get(open + 1..close)?.to_owned();
    // After the name: state (field 3) ... utime (field 14), stime (field 15).
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((name, ticks as f64 / USER_HZ))
}

/// CPU seconds used so far by process `pid`.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    stat_cpu(Path::new(&format!("/proc/{pid}/stat"))).map(|(_, seconds)| seconds)
}

/// CPU seconds used so far by this process, and by those of its live threads named `name`.
pub fn own_cpu_seconds(name: &str) -> Option<(f64, f64)> {
    let (_, all) = stat_cpu(Path::new("/proc/self/stat"))?;
    let mut named = 0.0;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        if let Some((thread, seconds)) = stat_cpu(&task.path().join("stat")) {
            if thread == name {
                named += seconds;
            }
        }
    }
    Some((all, named))
}

/// The machine's CPU time counters (the `cpu` line of `/proc/stat`), to tell how much
/// of a span the hypervisor gave to other guests (steal) on a shared virtual machine.
#[derive(Debug, Clone, Copy)]
pub struct CpuTimes {
    /// user, nice, system, idle, iowait, irq, softirq and steal, in clock ticks.
    total: u64,
    steal: u64,
}

impl CpuTimes {
    /// `None` where `/proc/stat` cannot be read.
    pub fn now() -> Option<CpuTimes> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let counters: Vec<u64> = stat
            .lines()
            .next()?
            .strip_prefix("cpu ")?
            .split_whitespace()
            .take(8)
            .map(|field| field.parse().ok())
            .collect::<Option<_>>()?;
        (counters.len() == 8).then(|| CpuTimes {
            total: counters.iter().sum(),
            steal: counters[7],
        })
    }

    /// The share of all CPU time from `self` to `later` that was stolen.
    pub fn steal_share(self, later: CpuTimes) -> f64 {
        let total = later.total.saturating_sub(self.total);
        if total == 0 {
            return 0.0;
        }
        later.steal.saturating_sub(self.steal) as f64 / total as f64
    }
}

/// Replaces the section of `document` under the line `heading` (up to the next `## `
/// heading) with `section`, or appends `section` when there is none.
pub fn upsert_markdown_section(document: &str, heading: &str, section: &str) -> String {
    let (mut out, mut in_section, mut replaced) = (String::new(), false, false);
    for line in document.split_inclusive('\n') {
        if line.trim_end() == heading {
            if !replaced {
                out.push_str(section);
                out.push('\n');
            }
            (in_section, replaced) = (true, true);
        } else if in_section && line.starts_with("## ") {
            in_section = false;
        }
        if !in_section {
            out.push_str(line);
        }
    }
    if !replaced {
        out = match out.trim_end() {
            "" => "# Benchmarks".to_string(),
            existing => existing.to_string(),
        };
        out.push_str("\n\n");
        out.push_str(section);
    }
    format!("{}\n", out.trim_end())
}

/// Reads `path` (empty when missing), puts `section` under `heading`, writes it back.
pub fn write_markdown_section(path: &Path, heading: &str, section: &str) -> Result<()> {
    let existing = std::fs::read_to_string(path).unwrap_or_default();
    std::fs::write(path, upsert_markdown_section(&existing, heading, section))
        .with_context(|| format!("writing {}", path.display()))
}

/// Adds a tool to the preamble of BENCHMARKS.md (the part before the first `## `), unless
/// present: `index_row` in its index table, its run command in the build-and-run block
/// and its binary in a `cargo build` line that names binaries one by one.
pub fn add_to_index(path: &Path, tool: &str, index_row: &str) -> Result<()> {
    let document = std::fs::read_to_string(path)?;
    let preamble_end = document
        .match_indices("\n## ")
        .next()
        .map_or(document.len(), |(at, _)| at + 1);
    let (preamble, rest) = document.split_at(preamble_end);
    let mut lines: Vec<String> = preamble.lines().map(str::to_owned).collect();
    if !preamble.contains(&format!("`{tool}`")) {
        if let Some(header) = lines.iter().position(|line| line.starts_with("| section | tool |")) {
            let mut end = header;
            while lines.get(end + 1).is_some_and(|line| line.starts_with('|')) {
                end += 1;
            }
            lines.insert(end + 1, index_row.to_string());
        }
    }
    if !preamble.contains(&format!("target/release/{tool}")) {
        if let Some(last_run) = lines.iter().rposition(|line| line.starts_with("target/release/bench-")) {
            lines.insert(
                last_run + 1,
                format!("target/release/{tool} --write-markdown BENCHMARKS.md"),
            );
        }
        for line in &mut lines {
            let names_binaries = line.starts_with("cargo build --release") && !line.contains("--all-targets");
            if names_binaries && !line.contains(tool) {
                line.push_str(&format!(" --bin {tool}"));
            }
        }
    }
    let mut updated = lines.join("\n");
    updated.push('\n');
    updated.push_str(rest);
    if updated != document {
        std::fs::write(path, updated).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
