//! Assembly of a node ([`RunningNode`]) in stages, each started from what the earlier ones
//! built (`stages.rs`): storage (the data directory, the keys) → learning (the
//! learner, the models, the embedder) → engine (shard actors with recovered live
//! state, experiments, conversations, search, purger) → stream (Kafka) → cluster
//! (catalog log, shard moves) → services → HTTP.
//!
//! One shutdown signal, a [`CancellationToken`], is cloned into every task the node
//! spawns (`tasks.rs` keeps them per stage). [`RunningNode::stop`] cancels it, then stops
//! the stages in reverse order: HTTP stops accepting and answers what is in flight;
//! the services' and the cluster's background work ends; the Kafka consumers end
//! between two batches with their offsets stored; the shard actors checkpoint and
//! stop (their group commits written); the learner stops; storage is flushed. Each
//! stage logs `stage stopped`, and the node `node stopped` with how many of its tasks
//! ended and how many were still running.
//!
//! A token rather than a `watch` channel: it is cloned into tasks as is, its
//! `cancelled()` is a future a `select!` can wait on without losing a wake-up (and a
//! task that starts after the cancel sees it at once), and it says only "stop",
//! which is all a task needs; the order is in which stage the node awaits first.

mod stages;
mod tasks;

use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::config::Config;
use crate::engine::conversation::Conversations;
use crate::engine::Engine;
use crate::experiments::Experiments;
use crate::ranking::ModelRegistry;
use crate::search::SearchIndex;
use crate::service::Services;
use crate::storage::Storage;
use crate::topology::{Topology, SINGLE_TOML};
use crate::training::Training;
use stages::{start_http, start_services, ClusterStage, EngineStage, LearningStage, Seat, StorageStage, StreamStage};
use tasks::{StageTasks, TaskTally};

/// How long a stage's tasks (other than HTTP's) may take to end once told to stop: a
/// Kafka consumer finishes the batch in hand, a shard move its current step.
const STAGE_STOP_LIMIT: Duration = Duration::from_secs(20);
/// Beyond `server.shutdown_grace_ms`, how long the HTTP stage may take to end.
const HTTP_STOP_MARGIN: Duration = Duration::from_secs(5);

/// A started node: its services, and what stops with it.
pub struct RunningNode {
    /// The use cases, for the HTTP frontend, the CLI and the tools.
    pub services: Arc<Services>,
    /// The shard actors (stopped after the inputs, with a last checkpoint).
    pub engine: Arc<Engine>,
    /// The learner (stopped after the engine).
    pub training: Arc<Training>,
    /// The search index (stopped with the engine).
    index: Arc<SearchIndex>,
    /// The experiments' counts (their writer stopped with the engine).
    experiments: Arc<Experiments>,
    /// The conversations' actors (stopped with the engine).
    conversations: Arc<Conversations>,
    /// The data directory, flushed last.
    storage: Storage,
    /// The one shutdown signal, cloned into every task the node spawns; cancelled
    /// when the node stops.
    shutdown: CancellationToken,
    /// The tasks of each stage, awaited in reverse order of the stages at stop.
    tasks: NodeTasks,
    /// How long the HTTP stage may take to drain (`server.shutdown_grace_ms` and a
    /// margin); set when it starts.
    http_stop_limit: Duration,
}

/// The tasks of the stages that spawn any.
struct NodeTasks {
    /// Checkpoints, metric upkeep, the purger.
    engine: StageTasks,
    /// The Kafka consumer, the learner's feed of other nodes' partitions.
    stream: StageTasks,
    /// The catalog log's follower, the topology log's follower, the shard mover.
    cluster: StageTasks,
    /// The labels' meanings, the node key's publication.
    services: StageTasks,
    /// The accept loop and its drain.
    http: StageTasks,
}

impl RunningNode {
    /// Starts the stages up to the services (HTTP: [`RunningNode::serve`]) and recovers live
    /// state. Must run inside an actix `System`. `admin_secret` is
    /// `RANKSTREAM_ADMIN_KEY`.
    pub async fn start(config: &Config, clock: SharedClock, admin_secret: Option<&str>) -> anyhow::Result<RunningNode> {
        // Before anything records: what happens during recovery counts too.
        crate::metrics::handle();
        let shutdown = CancellationToken::new();
        let mut tasks = NodeTasks {
            engine: StageTasks::new("engine"),
            stream: StageTasks::new("stream"),
            cluster: StageTasks::new("cluster"),
            services: StageTasks::new("services"),
            http: StageTasks::new("http"),
        };
        let seat = Seat::load(config)?;
        let storage = StorageStage::open(config, &clock, admin_secret, &seat)?;
        let learning = LearningStage::start(config, &seat, &storage).await?;
        let engine =
            EngineStage::start(config, clock, &seat, &storage, &learning, &shutdown, &mut tasks.engine).await?;
        let mut stream = StreamStage::start(config, &seat, &learning, &engine, &shutdown, &mut tasks.stream).await?;
        let cluster = ClusterStage::start(
            config,
            &seat,
            &storage,
            &engine,
            &mut stream,
            &shutdown,
            &mut tasks.cluster,
        )
        .await?;
        let services = start_services(
            config,
            &seat,
            &storage,
            &learning,
            &engine,
            stream,
            cluster,
            &shutdown,
            &mut tasks.services,
        )?;
        Ok(RunningNode {
            services,
            engine: engine.engine,
            training: learning.training,
            index: engine.search,
            experiments: engine.experiments,
            conversations: engine.conversations,
            storage: storage.storage,
            shutdown,
            tasks,
            http_stop_limit: HTTP_STOP_MARGIN,
        })
    }

    /// Starts the HTTP stage on `server.bind`; answers the address it listens on.
    pub async fn serve(&mut self, config: &Config) -> anyhow::Result<SocketAddr> {
        let address = start_http(config, &self.services, &self.shutdown, &mut self.tasks.http).await?;
        self.http_stop_limit = Duration::from_millis(config.server.shutdown_grace_ms) + HTTP_STOP_MARGIN;
        Ok(address)
    }

    /// Cancels the shutdown token and stops the stages in reverse order: HTTP drains,
    /// the background work and the Kafka consumers end, the shard actors checkpoint
    /// and stop, the learner stops, storage is flushed.
    pub async fn stop(self) -> anyhow::Result<()> {
        let RunningNode {
            services,
            engine,
            training,
            index,
            experiments,
            conversations,
            storage,
            shutdown,
            tasks,
            http_stop_limit,
        } = self;
        shutdown.cancel();
        let mut tally = TaskTally::default();
        // Inputs first: nothing new reaches the engine once these have ended.
        for (stage, limit) in [
            (tasks.http, http_stop_limit),
            (tasks.services, STAGE_STOP_LIMIT),
            (tasks.cluster, STAGE_STOP_LIMIT),
            (tasks.stream, STAGE_STOP_LIMIT),
        ] {
            tally += stop_stage_tasks(stage, limit).await;
        }
        // The engine: its periodic work ends, the last checkpoint persists every live
        // key, then the actors stop (their group commits written) with their threads.
        let engine_tally = tasks.engine.join(STAGE_STOP_LIMIT).await;
        tally += engine_tally;
        if let Err(error) = engine.checkpoint().await {
            tracing::error!(%error, "final checkpoint failed; the next start replays the log");
        }
        let stopping = engine.clone();
        tokio::task::spawn_blocking(move || {
            conversations.stop();
            stopping.stop();
            index.stop();
            experiments.stop_flushing();
        })
        .await?;
        tracing::info!(
            stage = "engine",
            tasks_ended = engine_tally.ended,
            tasks_still_running = engine_tally.still_running,
            "stage stopped"
        );
        tokio::task::spawn_blocking(move || training.stop()).await?;
        tracing::info!(stage = "learning", "stage stopped");
        drop((services, engine));
        tokio::task::spawn_blocking(move || storage.flush()).await??;
        tracing::info!(stage = "storage", "stage stopped");
        match tally.still_running {
            0 => tracing::info!(tasks_ended = tally.ended, tasks_still_running = 0, "node stopped"),
            still_running => tracing::warn!(
                tasks_ended = tally.ended,
                tasks_still_running = still_running,
                "node stopped with tasks that did not end when told to"
            ),
        }
        Ok(())
    }
}

/// Awaits a stage's tasks (told to stop by the token) and logs that the stage stopped.
async fn stop_stage_tasks(tasks: StageTasks, limit: Duration) -> TaskTally {
    let stage = tasks.stage;
    let tally = tasks.join(limit).await;
    tracing::info!(
        stage,
        tasks_ended = tally.ended,
        tasks_still_running = tally.still_running,
        "stage stopped"
    );
    tally
}

/// Runs a node until `shutdown` resolves, then stops it in order (see [`RunningNode::stop`]).
/// Must run inside an actix `System`. `admin_secret` is `RANKSTREAM_ADMIN_KEY`.
pub async fn run(
    config: Config,
    clock: SharedClock,
    admin_secret: Option<String>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut node = RunningNode::start(&config, clock, admin_secret.as_deref()).await?;
    await_search_loaded(&node.index, SEARCH_LOAD_WAIT).await;
    let address = node.serve(&config).await?;
    println!("rankstream listening on http://{address}");
    std::io::stdout().flush()?;
    tracing::info!(%address, shards = node.engine.shard_count(), data_dir = %config.storage.data_dir.display(), "serving");
    shutdown.await;
    node.stop().await
}

/// How long a starting node waits for the search index to read the catalog before
/// it opens the listener anyway (and answers `/readyz` 503 until it is done).
const SEARCH_LOAD_WAIT: Duration = Duration::from_secs(5);

/// Waits until the search index has read the catalog, at most `limit`: a small
/// catalog is read before the node listens, so a node is ready when it says it
/// listens; a large one (or a rebuild after a crash) goes on behind the listener.
async fn await_search_loaded(search: &SearchIndex, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !search.is_loaded() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if !search.is_loaded() {
        tracing::info!(
            waited_ms = limit.as_millis() as u64,
            "listening before the search index has read the catalog; /readyz is 503 until it has"
        );
    }
}

/// The configured models (the embedded registry when `training.models_file` is empty).
pub fn load_models(config: &Config, training: &Training) -> anyhow::Result<ModelRegistry> {
    let file = &config.training.models_file;
    let text = if file.is_empty() {
        crate::ranking::DEFAULT_MODELS_TOML.to_owned()
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading models file {file}"))?
    };
    Ok(ModelRegistry::load(&text, training.snapshots())?)
}

/// In a topology of several nodes, the address this node's entry gives (where the
/// others forward to): a node listens there unless `--bind` says otherwise.
pub fn topology_bind(config: &Config) -> anyhow::Result<Option<String>> {
    let topology = load_topology(config)?;
    if topology.nodes.len() < 2 {
        return Ok(None);
    }
    let me = topology.node_index(&config.node.id)?;
    Ok(Some(topology.nodes[me].http.clone()))
}

fn load_topology(config: &Config) -> anyhow::Result<Topology> {
    let text = if config.engine.topology_file.is_empty() {
        SINGLE_TOML.to_owned()
    } else {
        std::fs::read_to_string(&config.engine.topology_file)
            .with_context(|| format!("reading topology file {}", config.engine.topology_file))?
    };
    Ok(Topology::parse(&text)?)
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received, shutting down"),
        _ = terminate => tracing::info!("SIGTERM received, shutting down"),
    }
}
