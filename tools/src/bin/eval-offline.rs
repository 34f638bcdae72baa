//! Offline evaluation of the ranking models on public datasets, through the engine's
//! own ingestion, live state and model code: an in-process node (8 shards, learner
//! thread, session and user actors) on a scratch RocksDB directory.
//!
//! `sessions FOLDER`: any data set in the SR-GNN three-file layout
//! (`train_sessions.txt`, one session per line; `test_events_timeframe.tsv` or
//! `test_cases.tsv`) with an optional `manifest.toml` (its name, published results to
//! print beside ours). Every training session is ingested as page-view events; the
//! learner learns them; then the models are frozen (as the published protocol trains
//! once: no event is learned and nothing is rebuilt while frozen) and each test session
//! is replayed click by click as a live session: after each click the session's
//! snapshot is read from its actor and the model ranks every item for the next click.
//! HR@20, MRR@20, NDCG@20 and coverage over all prefix cases. Every item is ranked
//! without scoring all of them per case: see `all_items_candidates` for why its
//! candidates give the same top 20. `--split validation` holds out the last 10% of the
//! training sessions (in date order) the same way, for choosing hyper-parameters
//! without touching the test cases. `--online` keeps learning while the test sessions
//! stream (a live deployment's view; not the published protocol). `diginetica` is
//! `sessions` on `<data>/diginetica/srgnn_protocol` with SR-GNN's published figures.
//!
//! `movielens`: ml-latest-small, leave-last-out per user. Movies are the catalog
//! (genres as groups), every rating but each user's last is a page-view event (a
//! session per user and day), and each user's last movie is ranked among all the
//! movies they have not rated, from the user's live state: HR@10 per model. The
//! models learn every other rating, other users' later ones included (the usual
//! leave-last-out; a time-ordered split would cut them).
//!
//! ```text
//! cargo build --release --bin eval-offline
//! target/release/eval-offline diginetica --split validation
//! target/release/eval-offline diginetica --write-markdown BENCHMARKS.md
//! target/release/eval-offline sessions path/to/folder --model default,covisit
//! target/release/eval-offline movielens --write-markdown BENCHMARKS.md
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use clap::{Parser, Subcommand};
use serde_json::json;

use bench::{command_line, machine_description, percentile, thousands, utc_now, write_markdown_section};
use rankstream::clock::{SharedClock, SystemClock};
use rankstream::config::{Config, Durability};
use rankstream::domain::candidate::Candidate;
use rankstream::domain::event::{decode_v1, Event};
use rankstream::domain::{LiveStateId, Signals};
use rankstream::ranking::{covisit_key, rank, Model, RankContext, Trained};
use rankstream::server;
use rankstream::service::Services;
use rankstream::timestamp::format_rfc3339;

#[derive(Parser)]
#[command(about = "Offline evaluation of rankstream's models on public datasets")]
struct Cli {
    #[command(subcommand)]
    dataset: Dataset,
    /// The shared data folder.
    #[arg(long, global = true, default_value = "../shared/data")]
    data: PathBuf,
    /// A models file (config/models.toml shape); default: the embedded one.
    #[arg(long, global = true)]
    models: Option<PathBuf>,
    /// Append or replace this tool's section of a markdown file (BENCHMARKS.md).
    #[arg(long, global = true)]
    write_markdown: Option<PathBuf>,
    /// Rank with the fixed weights: no rebuild tunes the models after training (by
    /// default one does, as the daily rebuild of a deployment would).
    #[arg(long, global = true)]
    no_tune: bool,
}

#[derive(Subcommand)]
enum Dataset {
    /// Session-based next click on any data set in the SR-GNN three-file layout
    /// (`train_sessions.txt`, `test_events_timeframe.tsv` or `test_cases.tsv`), with an
    /// optional `manifest.toml` (its name, published results to print beside ours):
    /// HR@20, MRR@20, NDCG@20, coverage.
    Sessions {
        /// The folder of the three files.
        folder: PathBuf,
        /// The manifest; default: `manifest.toml` in the folder, if there is one.
        #[arg(long)]
        manifest: Option<PathBuf>,
        #[command(flatten)]
        run: SessionRun,
    },
    /// `sessions` on `<data>/diginetica/srgnn_protocol`, with SR-GNN's published figures.
    Diginetica {
        #[command(flatten)]
        run: SessionRun,
    },
    /// User-level personalization, leave-last-out: HR@10.
    Movielens {
        #[arg(long, default_value = "default,covisit,affinity,popularity")]
        model: String,
    },
}

/// How a session data set is evaluated.
#[derive(clap::Args)]
struct SessionRun {
    /// `test`: the published test cases; `validation`: the last 10% of training.
    #[arg(long, default_value = "test")]
    split: Split,
    /// Model ids to evaluate, comma-separated.
    #[arg(long, default_value = "default,covisit,popularity")]
    model: String,
    /// Keep learning while test sessions stream (not the published protocol).
    #[arg(long)]
    online: bool,
    /// Evaluate only the first N test sessions (quick runs).
    #[arg(long)]
    sessions: Option<usize>,
}

/// A session data set's manifest (`manifest.toml`).
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Manifest {
    /// How reports name the data set.
    name: Option<String>,
    /// Published results on the same split, printed beside ours.
    #[serde(default)]
    published: Vec<Published>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Published {
    model: String,
    hr20: Option<f64>,
    mrr20: Option<f64>,
    /// Where the figures were read.
    source: Option<String>,
}

/// Diginetica's manifest: SR-GNN's published figures (RESULTS.md §1).
const DIGINETICA_MANIFEST: &str = r#"
name = "Diginetica (SR-GNN protocol)"
[[published]]
model = "SR-GNN"
hr20 = 0.5073
mrr20 = 0.1759
source = "RESULTS.md §1"
"#;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Split {
    Test,
    Validation,
}

/// An in-process node on a scratch directory, assembled as the server assembles
/// one; the evaluation goes through its services.
struct Node {
    node: server::RunningNode,
    services: Arc<Services>,
    _dir: tempfile::TempDir,
}

impl Node {
    async fn start(models_file: Option<&Path>) -> Result<Node> {
        let dir = tempfile::Builder::new().prefix("rankstream-eval-").tempdir()?;
        let mut config = Config::load(None)?;
        config.storage.data_dir = dir.path().to_path_buf();
        // Scratch data: the WAL without fsync keeps a million events quick.
        config.storage.durability = Durability::Async;
        if let Some(path) = models_file {
            config.training.models_file = path.display().to_string();
        }
        let clock: SharedClock = Arc::new(SystemClock);
        let node = server::RunningNode::start(&config, clock, Some("eval-offline")).await?;
        let services = node.services.clone();
        Ok(Node {
            node,
            services,
            _dir: dir,
        })
    }

    async fn ingest(&self, events: Vec<Event>) -> Result<()> {
        for chunk in events.chunks(5_000) {
            for result in self.services.events.ingest_events(chunk.to_vec()).await?.results {
                result.context("ingest")?;
            }
        }
        Ok(())
    }

    /// Unless `--no-tune`: rebuilds the models from the log, which tunes them on its
    /// most recent sessions, and describes what the tuner chose (for the report).
    async fn tune(&self, cli: &Cli) -> Result<String> {
        if cli.no_tune {
            return Ok("Not tuned (`--no-tune`): the fixed weights of the models file rank.\n".to_owned());
        }
        let started = Instant::now();
        let report = self.node.training.retrain().await?;
        let trained = self.trained();
        let Some(tuning) = &trained.tuning else {
            return Ok(format!(
                "Rebuilt from the log ({} events) in {:.1} s; too few held-out clicks to tune: the fixed weights rank.\n",
                report.events,
                started.elapsed().as_secs_f64()
            ));
        };
        let chosen: Vec<String> = tuning
            .chosen
            .iter()
            .map(|(name, value)| format!("{name} = {value}"))
            .collect();
        let text = format!(
            "Self-tuned by a rebuild from the log ({} events, {:.1} s, of which tuning {:.1} s, {} settings tried) \
             on its {} most recent sessions ({} held-out clicks): HR@20 {:.4} → {:.4}, MRR@20 {:.4} → {:.4} \
             on those clicks. Chosen: {}.\n",
            report.events,
            started.elapsed().as_secs_f64(),
            tuning.took_ms as f64 / 1000.0,
            tuning.trials,
            tuning.sessions,
            tuning.cases,
            tuning.before.hr20,
            tuning.after.hr20,
            tuning.before.mrr20,
            tuning.after.mrr20,
            chosen.join(", ")
        );
        eprint!("{text}");
        Ok(text)
    }

    /// Waits until the learner has learned `events` events.
    async fn learned(&self, events: u64) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(600);
        while self.trained().events < events {
            ensure!(Instant::now() < deadline, "the learner did not catch up");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok(())
    }

    /// The latest snapshot of the trained artifacts.
    fn trained(&self) -> Arc<Trained> {
        self.node.training.latest()
    }

    fn set_frozen(&self, frozen: bool) {
        self.node.training.set_frozen(frozen);
    }

    fn model(&self, id: &str) -> Option<Arc<dyn Model>> {
        self.services.ranking.model(id).ok()
    }

    fn model_ids(&self) -> Vec<&str> {
        self.services.ranking.model_ids()
    }

    async fn signals(&self, key: LiveStateId) -> Result<Option<Arc<Signals>>> {
        Ok(self.node.engine.signals(key).await?)
    }

    async fn stop(self) -> Result<()> {
        drop(self.services);
        self.node.stop().await
    }
}

fn page_view(id: String, sid: &str, uid: Option<&str>, item: &str, at_ms: i64) -> Result<Event> {
    let value = json!({"type": "page_view", "page_type": "product", "sid": sid, "uid": uid,
                       "item_id": item, "original_timestamp": format_rfc3339(at_ms)});
    decode_v1(value, at_ms, || id).map_err(|error| anyhow::anyhow!("event: {error}"))
}

fn candidate(id: &str) -> Candidate {
    Candidate::new(id.to_owned(), Default::default())
}

fn model_ids(list: &str) -> Vec<String> {
    list.split(',')
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty())
        .collect()
}

/// Hit rate and reciprocal rank at a cut-off, with ranking latencies.
#[derive(Default)]
struct Metrics {
    cases: u64,
    hits: u64,
    reciprocal_ranks: f64,
    /// Sum of 1 / log2(rank + 1) over the hits (one relevant item: NDCG's ideal is 1).
    gains: f64,
    /// Items some case's top showed.
    shown: HashSet<String>,
    latencies_us: Vec<f64>,
}

impl Metrics {
    fn add(&mut self, ranked: &[&str], target: &str, latency: Duration) {
        self.cases += 1;
        if let Some(position) = ranked.iter().position(|id| *id == target) {
            self.hits += 1;
            self.reciprocal_ranks += 1.0 / (position + 1) as f64;
            self.gains += 1.0 / ((position + 2) as f64).log2();
        }
        for id in ranked {
            if !self.shown.contains(*id) {
                self.shown.insert((*id).to_owned());
            }
        }
        self.latencies_us.push(latency.as_secs_f64() * 1e6);
    }

    fn ndcg(&self) -> f64 {
        self.gains / self.cases.max(1) as f64
    }

    /// The share of `items` some case showed.
    fn coverage(&self, items: usize) -> f64 {
        self.shown.len() as f64 / items.max(1) as f64
    }

    fn hit_rate(&self) -> f64 {
        self.hits as f64 / self.cases.max(1) as f64
    }

    fn mrr(&self) -> f64 {
        self.reciprocal_ranks / self.cases.max(1) as f64
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    actix_rt::System::new().block_on(async move {
        match &cli.dataset {
            Dataset::Sessions { folder, manifest, run } => {
                let path = manifest.clone().unwrap_or_else(|| folder.join("manifest.toml"));
                let manifest = match (manifest, path.exists()) {
                    (None, false) => Manifest::default(),
                    _ => toml::from_str(
                        &std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?,
                    )
                    .with_context(|| format!("manifest {}", path.display()))?,
                };
                let name = manifest.name.clone().unwrap_or_else(|| folder.display().to_string());
                evaluate_sessions(&cli, folder, &name, &manifest, run).await
            }
            Dataset::Diginetica { run } => {
                let manifest: Manifest = toml::from_str(DIGINETICA_MANIFEST).expect("the built-in manifest parses");
                let folder = cli.data.join("diginetica/srgnn_protocol");
                let name = manifest.name.clone().unwrap_or_default();
                evaluate_sessions(&cli, &folder, &name, &manifest, run).await
            }
            Dataset::Movielens { model } => movielens(&cli, &model_ids(model)).await,
        }
    })
}

// ---------------------------------------------------------------- Session data sets

/// The project's target on Diginetica (issue 21: beyond the published graph models).
const TARGET_HR20: f64 = 0.56;
const TARGET_MRR20: f64 = 0.20;
/// Most popular items added to every case's candidates.
const POPULAR_CANDIDATES: usize = 100;
/// The cut-off of every session metric.
const CUT: usize = 20;

fn read_sessions(path: &Path) -> Result<Vec<Vec<String>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .map(|line| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter(|session| !session.is_empty())
        .collect())
}

/// A session's items and, for each, its time (ms).
type TimedSession = (Vec<String>, Vec<i64>);

/// Test sessions from `test_events_timeframe.tsv`: `(items, timeframes)`, by session index.
fn read_test_sessions(path: &Path) -> Result<Vec<TimedSession>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut sessions: BTreeMap<usize, Vec<(usize, String, i64)>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let fields: Vec<&str> = line.split('\t').collect();
        ensure!(fields.len() == 4, "bad line {line:?}");
        sessions.entry(fields[0].parse()?).or_default().push((
            fields[1].parse()?,
            fields[2].to_owned(),
            fields[3].parse()?,
        ));
    }
    Ok(sessions
        .into_values()
        .map(|mut events| {
            events.sort_by_key(|(position, _, _)| *position);
            events.into_iter().map(|(_, item, time)| (item, time)).unzip()
        })
        .collect())
}

/// The protocol's validation split: the last 10% of training sessions, their items
/// not seen in the first 90% removed, sessions left shorter than 2 dropped.
fn validation_split(train: Vec<Vec<String>>) -> (Vec<Vec<String>>, Vec<TimedSession>) {
    let cut = train.len() * 9 / 10;
    let (head, tail) = train.split_at(cut);
    let known: HashSet<&String> = head.iter().flatten().collect();
    let held_out = tail
        .iter()
        .map(|session| {
            session
                .iter()
                .filter(|item| known.contains(item))
                .cloned()
                .collect::<Vec<_>>()
        })
        .filter(|session| session.len() >= 2)
        .map(|session| {
            let times = (0..session.len() as i64).map(|i| i * 60_000).collect();
            (session, times)
        })
        .collect();
    (head.to_vec(), held_out)
}

/// The test sessions of a folder: `test_events_timeframe.tsv` (with times), else
/// rebuilt from `test_cases.tsv` (each session is its longest prefix and that
/// prefix's target; clicks a minute apart).
fn read_test_split(folder: &Path) -> Result<Vec<TimedSession>> {
    let timed = folder.join("test_events_timeframe.tsv");
    if timed.exists() {
        return read_test_sessions(&timed);
    }
    let path = folder.join("test_cases.tsv");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {} (or {})", path.display(), timed.display()))?;
    let mut sessions: Vec<Vec<String>> = Vec::new();
    let mut previous: Option<Vec<String>> = None;
    for line in text.lines().skip(1) {
        let (prefix, target) = line.split_once('\t').with_context(|| format!("bad line {line:?}"))?;
        let prefix: Vec<String> = prefix.split_whitespace().map(str::to_owned).collect();
        // The cases of a session come longest first, each the previous one less its last click.
        let continues = previous
            .as_ref()
            .is_some_and(|before| before.len() == prefix.len() + 2 && before.starts_with(&prefix));
        if !continues {
            let mut session = prefix.clone();
            session.push(target.trim().to_owned());
            sessions.push(session);
        }
        previous = Some(prefix.into_iter().chain([target.trim().to_owned()]).collect());
    }
    Ok(sessions
        .into_iter()
        .map(|session| {
            let times = (0..session.len() as i64).map(|i| i * 60_000).collect();
            (session, times)
        })
        .collect())
}

async fn evaluate_sessions(cli: &Cli, folder: &Path, name: &str, manifest: &Manifest, run: &SessionRun) -> Result<()> {
    let model_ids = model_ids(&run.model);
    let train = read_sessions(&folder.join("train_sessions.txt"))?;
    let (train, mut test) = match run.split {
        Split::Test => (train, read_test_split(folder)?),
        Split::Validation => validation_split(train),
    };
    if let Some(limit) = run.sessions {
        test.truncate(limit);
    }
    let node = Node::start(cli.models.as_deref()).await?;
    for id in &model_ids {
        ensure!(
            node.model(id).is_some(),
            "no model {id:?} (models: {:?})",
            node.model_ids()
        );
    }

    // Training sessions in date order, a minute apart, clicks a second apart.
    let started = Instant::now();
    let base = 1_451_606_400_000; // 2016-01-01
    let mut events = Vec::new();
    for (index, session) in train.iter().enumerate() {
        let sid = format!("train-{index}");
        for (position, item) in session.iter().enumerate() {
            let at = base + index as i64 * 60_000 + position as i64 * 1_000;
            events.push(page_view(format!("{sid}-{position}"), &sid, None, item, at)?);
        }
    }
    let train_events = events.len() as u64;
    node.ingest(events).await?;
    let ingested = started.elapsed();
    node.learned(train_events).await?;
    let trained = started.elapsed();
    let items = node.trained().items.len();
    eprintln!(
        "ingested {train_events} training events in {:.1} s ({:.0}/s), learned by {:.1} s",
        ingested.as_secs_f64(),
        train_events as f64 / ingested.as_secs_f64(),
        trained.as_secs_f64()
    );
    let tuned = node.tune(cli).await?;
    node.set_frozen(!run.online);

    let test_base = base + train.len() as i64 * 60_000 + 86_400_000;
    let mut metrics: Vec<Metrics> = model_ids.iter().map(|_| Metrics::default()).collect();
    let mut learned = train_events;
    let mut replayed = 0u64;
    let replay_started = Instant::now();
    for (index, (items, times)) in test.iter().enumerate() {
        let sid = format!("test-{index}");
        let session_start = test_base + index as i64 * 3_600_000;
        for position in 0..items.len() {
            let at = session_start + (times[position] - times[0]).max(0);
            let event = page_view(format!("{sid}-{position}"), &sid, None, &items[position], at)?;
            node.ingest(vec![event]).await?;
            replayed += 1;
            if run.online {
                learned += 1;
                node.learned(learned).await?;
            }
            let Some(target) = items.get(position + 1) else { break };
            let started = Instant::now();
            let session = node.signals(LiveStateId::Session(sid.clone())).await?;
            let context = RankContext {
                session_id: Some(sid.clone()),
                now: at,
                session,
                ..RankContext::default()
            };
            let candidates = all_items_candidates(&node, &context);
            let read_done = started.elapsed();
            for (model_id, metrics) in model_ids.iter().zip(&mut metrics) {
                let model = node.model(model_id).expect("checked");
                let ranked_at = Instant::now();
                let ranked = rank(model.as_ref(), &context, &candidates, Some(CUT), &[])?;
                let top: Vec<&str> = ranked.iter().map(|r| r.id.as_str()).collect();
                metrics.add(&top, target, read_done + ranked_at.elapsed());
            }
        }
    }
    let replay = replay_started.elapsed();
    node.stop().await?;

    let split_name = match run.split {
        Split::Test => format!(
            "test ({} cases)",
            thousands(metrics.first().map_or(0, |m| m.cases) as f64)
        ),
        Split::Validation => "validation (last 10% of training)".to_owned(),
    };
    let mode = if run.online {
        "online: the models keep learning while test sessions stream (not the published protocol)"
    } else {
        "frozen after training, as the published protocol"
    };
    let mut report = format!(
        "{name}, {split_name}; models {mode}.\n\
         {} training sessions ({train_events} events, {items} items) ingested and learned in {:.1} s; \
         {} test sessions ({replayed} events) replayed click by click in {:.1} s. Every item is \
         ranked for every case (see `all_items_candidates`); coverage is the share of the \
         items that some case's top {CUT} shows.\n{tuned}\n\
         | model | cases | HR@{CUT} | MRR@{CUT} | NDCG@{CUT} | coverage | rank latency p50 / p99 (µs) |\n\
         |---|---|---|---|---|---|---|\n",
        train.len(),
        trained.as_secs_f64(),
        test.len(),
        replay.as_secs_f64(),
    );
    for (model_id, metrics) in model_ids.iter().zip(&metrics) {
        report += &format!(
            "| `{model_id}` | {} | {:.4} | {:.4} | {:.4} | {:.3} | {:.0} / {:.0} |\n",
            metrics.cases,
            metrics.hit_rate(),
            metrics.mrr(),
            metrics.ndcg(),
            metrics.coverage(items),
            percentile(&metrics.latencies_us, 0.50),
            percentile(&metrics.latencies_us, 0.99),
        );
    }
    for published in &manifest.published {
        let figure = |value: Option<f64>| value.map_or("–".to_owned(), |value| format!("{value:.4}"));
        let source = published
            .source
            .as_deref()
            .map(|source| format!(", {source}"))
            .unwrap_or_default();
        report += &format!(
            "| {} (published{source}) | | {} | {} | | | |\n",
            published.model,
            figure(published.hr20),
            figure(published.mrr20)
        );
    }
    if name.starts_with("Diginetica") {
        report += &format!("| project target | | ≥ {TARGET_HR20:.2} | ≥ {TARGET_MRR20:.2} | | | |\n");
    }
    report += "\nLatency: reading the session's snapshot from its actor, gathering candidates, and \
               ranking them with that model (one case).\n";
    println!("{report}");
    if let Some(path) = &cli.write_markdown {
        let heading = match (run.split, run.online) {
            (Split::Test, false) => format!("Offline evaluation: {name}"),
            (Split::Test, true) => format!("Offline evaluation: {name}, online learning"),
            (Split::Validation, _) => format!("Offline evaluation: {name}, validation slice"),
        };
        write_section(path, &heading, &report)?;
    }
    Ok(())
}

/// Every item, as far as a ranking's top [`CUT`] can tell: the items the sparse
/// co-visitation scores reach, the most popular ones and the first [`CUT`] by index,
/// in index order (the order a list of all items would have).
///
/// Exact for every model over session data without a catalog (no groups, embeddings,
/// availability or purchases, so those features are 0 for every item): an item the
/// co-visitation scores do not reach scores `w_popularity × its popularity`, the
/// same function for all of them. With `w_popularity > 0` the best of them are the
/// most popular (ties in index order, as [`Popularity::top`] breaks them); with
/// `w_popularity = 0` they all tie at 0 and a list of all items puts the first by
/// index first. (A negative popularity weight would need the least popular; no
/// configured model has one.)
fn all_items_candidates(node: &Node, context: &RankContext) -> Vec<Candidate> {
    let trained = node.trained();
    let prefix: Vec<u32> = context
        .session
        .iter()
        .flat_map(|session| session.recent.item_ids_oldest_first(usize::MAX))
        .filter_map(|id| trained.items.get(id))
        .collect();
    let ranked_session = context.session_id.as_deref().map(covisit_key);
    let mut chosen: HashSet<u32> = trained.covisit.scores(&prefix, ranked_session).into_keys().collect();
    chosen.extend(
        trained
            .popularity
            .top(context.models_time(trained.clock), POPULAR_CANDIDATES)
            .into_iter()
            .map(|(item, _)| item),
    );
    chosen.extend(0..(CUT as u32).min(trained.items.len() as u32));
    let mut chosen: Vec<u32> = chosen.into_iter().collect();
    chosen.sort_unstable();
    chosen
        .into_iter()
        .map(|item| candidate(trained.items.id(item)))
        .collect()
}

// ---------------------------------------------------------------- MovieLens

async fn movielens(cli: &Cli, model_ids: &[String]) -> Result<()> {
    let folder = cli.data.join("movielens_latest_small");
    let node = Node::start(cli.models.as_deref()).await?;
    for id in model_ids {
        ensure!(
            node.model(id).is_some(),
            "no model {id:?} (models: {:?})",
            node.model_ids()
        );
    }
    let started = Instant::now();
    let mut movies = Vec::new();
    let mut rows = Vec::new();
    let mut reader = csv::Reader::from_path(folder.join("movies.csv"))?;
    for record in reader.records() {
        let record = record?;
        let (id, title, genres) = (&record[0], &record[1], &record[2]);
        let groups: Vec<&str> = genres.split('|').filter(|g| *g != "(no genres listed)").collect();
        rows.push(json!({"id": id, "name": title, "groups": groups}));
        movies.push(id.to_owned());
    }
    for result in node.services.catalog.upsert_items(rows).await? {
        if let Err(error) = result {
            bail!("catalog upsert: {error}");
        }
    }

    let mut ratings: HashMap<String, Vec<(i64, String)>> = HashMap::new();
    let mut reader = csv::Reader::from_path(folder.join("ratings.csv"))?;
    for record in reader.records() {
        let record = record?;
        ratings
            .entry(record[0].to_owned())
            .or_default()
            .push((record[3].parse::<i64>()? * 1000, record[1].to_owned()));
    }
    let mut users: Vec<(String, Vec<(i64, String)>)> = ratings.into_iter().collect();
    users.sort_by(|a, b| a.0.cmp(&b.0));
    let mut events = Vec::new();
    let mut targets = Vec::new();
    for (uid, history) in &mut users {
        history.sort();
        let (at, last) = history.pop().context("a user without ratings")?;
        for (n, (time, movie)) in history.iter().enumerate() {
            let sid = format!("{uid}-{}", time / 86_400_000);
            events.push(page_view(format!("{uid}-{n}"), &sid, Some(uid.as_str()), movie, *time)?);
        }
        targets.push((uid.clone(), at, last));
    }
    let count = events.len() as u64;
    node.ingest(events).await?;
    node.learned(count).await?;
    let tuned = node.tune(cli).await?;
    node.set_frozen(true);
    let learned = started.elapsed();

    let mut metrics: Vec<Metrics> = model_ids.iter().map(|_| Metrics::default()).collect();
    for ((uid, at, target), (_, history)) in targets.iter().zip(&users) {
        let seen: HashSet<&str> = history.iter().map(|(_, movie)| movie.as_str()).collect();
        let user = node.signals(LiveStateId::User(uid.clone())).await?;
        let context = RankContext {
            user_id: Some(uid.clone()),
            now: *at,
            user,
            ..RankContext::default()
        };
        let mut candidates: Vec<Candidate> = movies
            .iter()
            .filter(|movie| !seen.contains(movie.as_str()))
            .map(|movie| candidate(movie))
            .collect();
        node.services.ranking.attach_features(&mut candidates)?;
        for (model_id, metrics) in model_ids.iter().zip(&mut metrics) {
            let model = node.model(model_id).expect("checked");
            let ranked_at = Instant::now();
            let ranked = rank(model.as_ref(), &context, &candidates, Some(10), &[])?;
            let top: Vec<&str> = ranked.iter().map(|r| r.id.as_str()).collect();
            metrics.add(&top, target, ranked_at.elapsed());
        }
    }
    node.stop().await?;

    let mut report = format!(
        "MovieLens ml-latest-small, leave-last-out: {} users, {count} ratings ingested as events \
         and learned in {:.1} s; each user's last movie ranked among the {} movies minus those \
         the user rated, from the user's live state. The models learn every other rating, other \
         users' later ones included (the usual leave-last-out; a time-ordered split would cut them).\n\n\
         {tuned}\n\
         | model | users | HR@10 | MRR@10 | rank latency p50 / p99 (ms, ~9.7k candidates) |\n|---|---|---|---|---|\n",
        targets.len(),
        learned.as_secs_f64(),
        movies.len(),
    );
    for (model_id, metrics) in model_ids.iter().zip(&metrics) {
        report += &format!(
            "| `{model_id}` | {} | {:.4} | {:.4} | {:.1} / {:.1} |\n",
            metrics.cases,
            metrics.hit_rate(),
            metrics.mrr(),
            percentile(&metrics.latencies_us, 0.50) / 1000.0,
            percentile(&metrics.latencies_us, 0.99) / 1000.0,
        );
    }
    println!("{report}");
    if let Some(path) = &cli.write_markdown {
        write_section(path, "Offline evaluation: MovieLens (leave-last-out)", &report)?;
    }
    Ok(())
}

fn write_section(path: &Path, heading: &str, report: &str) -> Result<()> {
    let heading = format!("## {heading}");
    let section = format!(
        "{heading}\n\nCommand: `{}`\nRun: {} on {}.\n\n{report}",
        command_line(),
        utc_now(),
        machine_description()
    );
    write_markdown_section(path, &heading, &section)
}
