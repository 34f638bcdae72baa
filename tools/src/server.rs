//! A `rankstream serve` the tool starts for itself: on a fresh temp data dir with a
//! generated admin key, stopped with SIGTERM when done, and killed (its temp dir
//! removed) if the tool is interrupted.

use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rand::Rng;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::client::Target;

/// Rate and burst of every key (the 1,000/s default would throttle the tool's own requests).
pub const RATE_LIMIT_ENV: [(&str, &str); 2] = [
    ("RANKSTREAM__AUTH__DEFAULT_RATE_PER_SEC", "1000000"),
    ("RANKSTREAM__AUTH__DEFAULT_BURST", "1000000"),
];

/// The options of every tool that spawns a server on generated data and writes its
/// section of BENCHMARKS.md (`#[command(flatten)]` in the tool's own).
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Seed of the generated data and request bodies.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// The rankstream binary to spawn [default: `rankstream` next to this executable].
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// Write (or replace) this tool's section of this Markdown file.
    #[arg(long)]
    pub write_markdown: Option<PathBuf>,
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
    /// The executable it runs.
    binary: PathBuf,
    /// Holds `data/` and `server.log` (the server's stderr).
    pub dir: PathBuf,
    /// `http://IP:PORT`, from its `rankstream listening on` line.
    pub url: String,
    /// Its RANKSTREAM_ADMIN_KEY, generated for it.
    pub admin_key: String,
}

impl SpawnedServer {
    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Starts `binary serve --bind 127.0.0.1:0` (unless `extra_args` bind) on a fresh data dir with a generated
    /// RANKSTREAM_ADMIN_KEY and durability sync, plus `extra_args` and `extra_env`, and
    /// returns once it listens.
    pub async fn start(binary: &Path, extra_args: &[OsString], extra_env: &[(&str, &str)]) -> Result<SpawnedServer> {
        let admin_key = generate_key();
        let unique = uuid::Uuid::now_v7().simple();
        let dir = std::env::temp_dir().join(format!("rankstream-bench-{unique}"));
        std::fs::create_dir_all(&dir)?;
        let log_path = dir.join("server.log");
        // A node of a cluster listens where its topology says (`extra_args` bring --bind).
        let bind: &[&str] = match extra_args.iter().any(|arg| arg == "--bind") {
            true => &[],
            false => &["--bind", "127.0.0.1:0"],
        };
        let mut child = tokio::process::Command::new(binary)
            .arg("serve")
            .args(bind)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(extra_args)
            .env("RANKSTREAM_ADMIN_KEY", &admin_key)
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
        Ok(SpawnedServer {
            child,
            pid,
            binary: binary.to_owned(),
            dir,
            url,
            admin_key,
        })
    }

    /// Says on stderr which binary runs where: `spawned BINARY at URL (in DIR)`.
    pub fn announce(&self) {
        eprintln!(
            "spawned {} at {} (in {})",
            self.binary.display(),
            self.url,
            self.dir.display()
        );
    }

    /// The server as a target of requests with its admin key.
    pub fn target(&self) -> Result<Target> {
        Target::parse(&self.url, self.admin_key.clone())
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

    /// Runs `work` against the server, then stops it whether `work` succeeded or not, and
    /// returns what `work` returned (a failed stop is reported first).
    pub async fn stop_after<T>(self, work: impl Future<Output = Result<T>>) -> Result<T> {
        let outcome = work.await;
        self.stop().await?;
        outcome
    }
}

impl Drop for SpawnedServer {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            RUNNING.lock().retain(|(running, _)| *running != pid);
        }
    }
}
