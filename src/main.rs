//! The `rankstream` binary: `serve` a node; manage API `keys`, `backup` and `restore`
//! a node's data offline; set up and change a `cluster`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use rankstream::api_keys::KeyStore;
use rankstream::clock::{Clock, SystemClock};
use rankstream::config::Config;
use rankstream::domain::api_key::NewKey;
use rankstream::storage::{Settings, Storage};
use rankstream::timestamp::parse_time_value;
use serde_json::json;

mod cli;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for this process. mimalloc advises the kernel to
/// back its arena with huge pages, and khugepaged then collapses any 2 MiB range with
/// one page in use into a whole huge page: in the hour's soak RSS stepped up by ~4%
/// while the load and the models stayed the same, with ~11 collapses a minute and the
/// huge pages of the process growing from 658 to 766 MiB in ten minutes. Without them
/// RSS follows what the heap holds; the cost is some more TLB misses (not measurable
/// in bench-recommend: 99 and 108 µs of server CPU per request against 101 and 130
/// before). The same as `MIMALLOC_ALLOW_THP=0`, which mimalloc reads before `main`;
/// this call needs no environment.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_THP_DISABLE) takes plain integers and changes only a flag
    // of this process; a kernel without it answers EINVAL, which is ignored.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

#[derive(Parser)]
#[command(name = "rankstream", version, about = "Real-time ranking engine")]
struct Cli {
    /// How log lines are written to stderr: `text`, or `json` (one JSON object per line,
    /// tracing-subscriber's JSON format, for a log shipper).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "RANKSTREAM_LOG_FORMAT")]
    log_format: LogFormat,
    /// What to log, in RUST_LOG's syntax: a level (`debug`) or per-module directives
    /// (`info,rankstream::stream=debug,rdkafka=warn`). Default: $RUST_LOG, else `info`.
    #[arg(long, global = true, value_name = "FILTER")]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API until SIGINT/SIGTERM.
    Serve {
        #[command(flatten)]
        common: CommonArgs,
        /// Address to listen on (overrides server.bind; a node of a multi-node topology
        /// listens on its topology `http` address without it); port 0 picks a free one.
        #[arg(long)]
        bind: Option<String>,
    },
    /// Set up or inspect a cluster of nodes that share the shards over Kafka.
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// Create, list or revoke API keys directly in the data directory (server stopped).
    Keys {
        #[command(flatten)]
        common: CommonArgs,
        #[command(subcommand)]
        action: KeysAction,
    },
    /// Back up a stopped node's data directory (a running node: POST /v1/admin/backup).
    Backup {
        #[command(flatten)]
        common: CommonArgs,
        /// The backup directory: created if missing; it may hold earlier backups of the
        /// node, whose table files a new backup shares rather than copies.
        #[arg(long)]
        to: PathBuf,
    },
    /// Load catalog items, users or events from a JSON-lines or CSV file into a running
    /// node, with a progress bar; resumable after an interruption.
    Import(ImportArgs),
    /// Restore a data directory (new or empty) from a backup directory.
    Restore {
        #[command(flatten)]
        common: CommonArgs,
        /// The backup directory.
        #[arg(long)]
        from: PathBuf,
        /// Which backup (see GET /v1/admin/backup); default: the latest.
        #[arg(long)]
        backup_id: Option<u32>,
    },
}

#[derive(Args)]
struct CommonArgs {
    /// Configuration file layered over the compiled-in config/default.toml.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// RocksDB directory (overrides storage.data_dir).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// Topology file (overrides engine.topology_file): shards and the nodes owning them.
    #[arg(long, global = true)]
    topology: Option<PathBuf>,
    /// Which node of the topology this process is (overrides node.id).
    #[arg(long, global = true)]
    node_id: Option<String>,
}

#[derive(Args)]
pub struct ImportArgs {
    /// The file: JSON lines (NDJSON, one object per line) or CSV with a header row.
    pub file: PathBuf,
    /// What its rows are.
    #[arg(long, value_enum)]
    pub kind: ImportKind,
    /// The node to load into.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// An API key with the scope the rows need (catalog:write, users:write or events:write).
    #[arg(long, env = "RANKSTREAM_ADMIN_KEY", hide_env_values = true)]
    pub key: String,
    /// The file's format; default: CSV for a `.csv` file, JSON lines for any other.
    #[arg(long, value_enum)]
    pub format: Option<ImportFormat>,
    /// Items: the table of rows that name none (`_table`; the node's default: items).
    #[arg(long)]
    pub table: Option<String>,
    /// The column (or key) holding each row's id: items' `id`, users' `uid`, events' `id`.
    #[arg(long)]
    pub id_column: Option<String>,
    /// Rename a column (or key) to a field, COLUMN=FIELD; repeat for more.
    #[arg(long = "map", value_name = "COLUMN=FIELD")]
    pub map: Vec<String>,
    /// CSV: split a column into an array of strings at SEPARATOR, COLUMN=SEPARATOR (e.g. genres=|).
    #[arg(long = "split", value_name = "COLUMN=SEPARATOR")]
    pub split: Vec<String>,
    /// Leave a column (or key) out; repeat for more.
    #[arg(long = "skip", value_name = "COLUMN")]
    pub skip: Vec<String>,
    /// Events: the `type` of rows that have none.
    #[arg(long)]
    pub event_type: Option<String>,
    /// Rows per request.
    #[arg(long, default_value_t = 1000)]
    pub batch_size: usize,
    /// Where rows the node refuses go, with their reasons (JSON lines); default:
    /// NAME.rejected.jsonl in the working directory (NAME: the file's name).
    #[arg(long)]
    pub rejected: Option<PathBuf>,
    /// Start from the first row although an earlier import of the file stopped midway.
    #[arg(long)]
    pub restart: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportKind {
    Items,
    Users,
    Events,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportFormat {
    Jsonl,
    Csv,
}

#[derive(Args)]
pub struct ClusterArgs {
    /// Kafka bootstrap servers, HOST:PORT[,HOST:PORT...] (overrides kafka.brokers).
    #[arg(long)]
    pub brokers: Option<String>,
    /// The cluster's topology file.
    #[arg(long)]
    pub topology: PathBuf,
    /// Configuration file (topic names, Kafka client settings) over the defaults.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum ClusterAction {
    /// Create every topic the cluster needs, with its partition count and cleanup
    /// policy; topics that exist are left as they are (running it again is harmless).
    Init {
        #[command(flatten)]
        args: ClusterArgs,
        /// Replicas of each partition (1 for a single broker).
        #[arg(long, default_value_t = 1)]
        replication_factor: i32,
    },
    /// Publish a new topology (same shard count, every shard owned once, every node
    /// reachable) with the next epoch; the nodes move the shards live.
    Apply {
        #[command(flatten)]
        args: ClusterArgs,
    },
    /// Print the epoch, each node's health and shards, any shard move in progress, the
    /// consumer lag of each shard, and what the nodes forwarded and replicated.
    Status {
        #[command(flatten)]
        args: ClusterArgs,
        /// An admin key, to read each node's statistics (default: RANKSTREAM_ADMIN_KEY).
        #[arg(long)]
        key: Option<String>,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum KeysAction {
    /// Create a key and print it with its secret (shown only here).
    Create {
        #[arg(long)]
        name: String,
        /// Comma-separated scopes, e.g. recommend,search or admin.
        #[arg(long, value_delimiter = ',')]
        scopes: Vec<String>,
        /// Expiry: RFC 3339 time, unix seconds/milliseconds, or a duration like 30d, 12h, 90m.
        #[arg(long)]
        expires: Option<String>,
        #[arg(long)]
        rate_per_sec: Option<u32>,
        #[arg(long)]
        burst: Option<u32>,
    },
    /// List keys (never their secrets).
    List,
    /// Revoke a key by id.
    Revoke { id: String },
}

fn main() -> anyhow::Result<()> {
    disable_transparent_huge_pages();
    let cli = Cli::parse();
    init_logging(cli.log_format, cli.log.as_deref())?;
    match cli.command {
        Command::Serve { common, bind } => {
            let mut config = load_config(&common)?;
            match bind {
                Some(bind) => config.server.bind = bind,
                None => {
                    if let Some(http) = rankstream::server::topology_bind(&config)? {
                        config.server.bind = http;
                    }
                }
            }
            let admin_secret = std::env::var("RANKSTREAM_ADMIN_KEY").ok();
            rankstream::engine::run_actor_system(rankstream::server::run(
                config,
                Arc::new(SystemClock),
                admin_secret,
                rankstream::server::shutdown_signal(),
            ))
        }
        Command::Keys { common, action } => keys_command(&load_config(&common)?, action),
        Command::Backup { common, to } => cli::backup::backup(&load_config(&common)?, &to),
        Command::Import(args) => tokio::runtime::Runtime::new()?.block_on(cli::import::run(args)),
        Command::Restore {
            common,
            from,
            backup_id,
        } => cli::backup::restore(&load_config(&common)?, &from, backup_id),
        Command::Cluster { action } => {
            let runtime = tokio::runtime::Runtime::new()?;
            runtime.block_on(cli::cluster::run(action))
        }
    }
}

/// Logs to stderr in `format`, filtered by `--log`, else by RUST_LOG, else at `info`.
fn init_logging(format: LogFormat, filter: Option<&str>) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = match filter {
        Some(directives) => EnvFilter::try_new(directives)
            .map_err(|error| anyhow::anyhow!("--log {directives:?} is not a log filter: {error}"))?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    Ok(())
}

fn load_config(common: &CommonArgs) -> anyhow::Result<Config> {
    let mut config = Config::load(common.config.as_deref())?;
    if let Some(dir) = &common.data_dir {
        config.storage.data_dir = dir.clone();
    }
    if let Some(topology) = &common.topology {
        config.engine.topology_file = topology.display().to_string();
    }
    if let Some(id) = &common.node_id {
        config.node.id = id.clone();
    }
    Ok(config)
}

fn keys_command(config: &Config, action: KeysAction) -> anyhow::Result<()> {
    let retention = config.training.ranking_retention();
    let storage =
        Storage::open_with(&config.storage.data_dir, Settings::of(&config.storage, retention)).with_context(|| {
            format!(
                "opening {} (is a server running on it?)",
                config.storage.data_dir.display()
            )
        })?;
    let clock = Arc::new(SystemClock);
    let keys = KeyStore::load(storage, clock.clone())?;
    let output = match action {
        KeysAction::Create {
            name,
            scopes,
            expires,
            rate_per_sec,
            burst,
        } => {
            let expires_at = expires
                .map(|text| parse_expiry(&text, clock.now_millis()))
                .transpose()?;
            let (key, secret) = keys.create(NewKey {
                name,
                scopes,
                expires_at,
                rate_per_sec,
                burst,
            })?;
            let mut view = key.view();
            view["key"] = json!(secret);
            view
        }
        KeysAction::List => json!({ "keys": keys.list().iter().map(|k| k.view()).collect::<Vec<_>>() }),
        KeysAction::Revoke { id } => {
            anyhow::ensure!(keys.revoke(&id)?, "no key with id {id:?}");
            json!({ "id": id, "revoked": true })
        }
    };
    println!("{}", serde_json::to_string_pretty(&output)?);
    Ok(())
}

/// An absolute time (RFC 3339 or unix) or a duration from now (`30d`, `12h`, `90m`, `45s`).
fn parse_expiry(text: &str, now_millis: i64) -> anyhow::Result<i64> {
    let unit_millis = match text.chars().last() {
        Some('d') => Some(86_400_000),
        Some('h') => Some(3_600_000),
        Some('m') => Some(60_000),
        Some('s') => Some(1_000),
        _ => None,
    };
    if let Some(unit) = unit_millis {
        if let Ok(count) = text[..text.len() - 1].parse::<i64>() {
            return Ok(now_millis + count * unit);
        }
    }
    let value = match text.parse::<f64>() {
        Ok(number) => json!(number),
        Err(_) => json!(text),
    };
    parse_time_value(&value).with_context(|| format!("--expires {text:?} is neither a time nor a duration like 30d"))
}
