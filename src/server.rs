//! Assembly of a node ([`Node`]: storage, keys, learner, engine, search, chat,
//! Kafka, the services over them), the HTTP frontend on it, and its orderly stop.

use std::future::Future;
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::api::{self, AppState, FailedAuth, LlmClient, PeerClaims, Peers, RateLimits, RequestTimes};
use crate::api_keys::KeyStore;
use crate::clock::SharedClock;
use crate::config::Config;
use crate::embed::SharedEmbedder;
use crate::engine::{Engine, HeldShards, Purger};
use crate::experiments::{Experiments, FLUSH_INTERVAL};
use crate::ranking::ModelRegistry;
use crate::search::SearchIndex;
use crate::service::backup::Backups;
use crate::service::chat::{ChatService, ReplyWriter};
use crate::service::cluster::Cluster;
use crate::service::moves::{phases_at_start, Mover};
use crate::service::{RankingStats, Services};
use crate::storage::{Settings, Storage};
use crate::stream::catalog_log::{follow_catalog_log, CatalogLog, Replica};
use crate::stream::learner_feed::follow_other_partitions;
use crate::stream::{start_consumer, topology_log, EventProducer, Producer, SharedStats};
use crate::topology::{Ownership, Topology, SINGLE_TOML};
use crate::training::Training;

/// A started node: its services, and what stops with it.
pub struct Node {
    /// The use cases, for the HTTP frontend, the CLI and the tools.
    pub services: Arc<Services>,
    storage: Storage,
    /// The periodic checkpoints and the Kafka consumer, aborted at stop.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Node {
    /// Opens the data directory, starts the learner, the shard actors, the search
    /// index, the conversations and (when configured) Kafka, and recovers live state.
    /// Must run inside an actix `System`. `admin_secret` is `RANKSTREAM_ADMIN_KEY`.
    pub async fn start(config: &Config, clock: SharedClock, admin_secret: Option<&str>) -> anyhow::Result<Node> {
        // Before anything records: what happens during recovery counts too.
        crate::metrics::handle();
        let topology = load_topology(config)?;
        let clustered = topology.nodes.len() > 1;
        if clustered && !config.kafka.enabled {
            anyhow::bail!(
                "the topology has {} nodes; a multi-node topology needs Kafka: set [kafka] enabled = true \
                 (and kafka.brokers) on every node",
                topology.nodes.len()
            );
        }
        let kafka = &config.kafka;
        if topology.nodes.len() > 1 && !kafka.inputs.iter().any(|input| input.topic == kafka.rest_topic) {
            anyhow::bail!(
                "in a cluster, REST events reach every node's learner through kafka.rest_topic: \
                 it must be set and listed in kafka.inputs (it is {:?})",
                kafka.rest_topic
            );
        }
        // A cluster follows the latest topology `cluster apply` published, if any.
        let (applied, topology_offset) = match clustered {
            true => topology_log::latest(kafka)?,
            false => (None, 0),
        };
        let (epoch, current) = match applied {
            Some(applied) => {
                let current = Topology::parse(&applied.text)
                    .with_context(|| format!("the cluster's topology of epoch {}", applied.epoch))?;
                anyhow::ensure!(
                    current.shards == topology.shards,
                    "the cluster has {} shards; the topology file says {}",
                    current.shards,
                    topology.shards
                );
                (applied.epoch, current)
            }
            None => (0, topology.clone()),
        };
        let me = match topology.node_index(&config.node.id) {
            Ok(index) => topology.nodes[index].id.clone(),
            // A node the cluster's current topology names may be new to the file.
            Err(_) if current.node(&config.node.id).is_some() => config.node.id.clone(),
            Err(error) => return Err(error.into()),
        };
        let ownership = Ownership::new(&me, epoch, current, &[]);
        let cluster = Arc::new(Cluster::new(ownership.clone(), clustered, &config.node));
        let retention = config.training.ranking_retention();
        let storage = Storage::open_with(&config.storage.data_dir, Settings::of(&config.storage, retention))
            .with_context(|| format!("opening the data directory {}", config.storage.data_dir.display()))?;
        let keys = Arc::new(KeyStore::load(storage.clone(), clock.clone())?);
        if let Some(secret) = keys.bootstrap_admin(admin_secret)? {
            println!("bootstrap admin key: {secret}");
            println!("(shown once; keep it, or set RANKSTREAM_ADMIN_KEY to choose your own)");
        }
        // In a cluster, this node's own key authenticates its calls to the others.
        let node_key = match cluster.is_multi_node() {
            true => Some(keys.node_key(cluster.me())?),
            false => None,
        };
        let training = Training::start(storage.clone(), topology.shards, config.training.clone())?;
        let models = load_models(config, &training)?;
        let embedder = load_embedder(config).await?;
        let engine = Arc::new(Engine::start(
            storage.clone(),
            ownership.clone(),
            clock.clone(),
            &config.engine,
            training.clone(),
        )?);
        training.attach_catalog(engine.item_reader());
        // Before any event flows: outcomes are attributed to experiments as they are applied.
        let experiments = Experiments::load(storage.clone(), clock)?;
        engine.observe_outcomes(experiments.clone());
        experiments
            .start_flushing(FLUSH_INTERVAL)
            .context("starting the experiment counts writer")?;
        // Which shards this node serves: on one node all; in a cluster, what it holds
        // (the shards of its topology at its first start) and is taking over.
        let held = match clustered {
            false => (0..topology.shards).map(|shard| (shard, 0)).collect(),
            true => match engine.held_shards()? {
                Some(held) => held,
                None => {
                    // The cluster's first topology (the file's, or epoch 1 that `cluster
                    // init` published) gives a node its shards; a node new to a later one
                    // takes them over from their owners.
                    let first: HeldShards = match epoch {
                        0 | 1 => ownership
                            .current()
                            .owner_shards(&me)
                            .iter()
                            .map(|&shard| (shard, epoch))
                            .collect(),
                        _ => HeldShards::new(),
                    };
                    engine.store_held_shards(&first).await?;
                    first
                }
            },
        };
        let phases = phases_at_start(&me, &ownership.current().topology, &held);
        ownership.update(|current| current.phases = phases);
        if let Some((_, secret)) = &node_key {
            engine.set_session_claims(Arc::new(PeerClaims::new(cluster.clone(), secret)?));
        }
        let llm: Option<Arc<dyn ReplyWriter>> = match LlmClient::from_config(&config.chat)? {
            Some(client) => Some(Arc::new(client)),
            None => None,
        };
        let chat = ChatService::start(&engine, &config.chat, llm);
        let search = open_search(config, &engine)?;
        let replayed = engine.recover().await?;
        tracing::info!(replayed, "live state recovered");
        let mut tasks = vec![
            tokio::spawn(checkpoint_loop(engine.clone(), config.engine.checkpoint_interval_ms)),
            tokio::spawn(metrics_upkeep()),
        ];

        let producer = match (kafka.enabled, kafka.rest_topic.is_empty()) {
            (true, false) => Some(EventProducer::new(kafka, &kafka.rest_topic, engine.shard_count())?),
            _ => None,
        };
        let stream_stats = kafka.enabled.then(SharedStats::default);
        let (mut consumer_control, mut feed_control) = (None, None);
        if let Some(stats) = stream_stats.as_ref().filter(|_| !kafka.inputs.is_empty()) {
            let reroute = match cluster.is_multi_node() {
                true => {
                    let (feed, control) = follow_other_partitions(
                        kafka,
                        &engine.local_shards(),
                        engine.shard_count(),
                        engine.clone(),
                        training.clone(),
                        stats.clone(),
                    )?;
                    tasks.push(feed);
                    feed_control = Some(control);
                    Some(EventProducer::new(kafka, &kafka.rest_topic, engine.shard_count())?)
                }
                false => None,
            };
            let (consumer, control) = start_consumer(
                kafka.clone(),
                engine.local_shards(),
                engine.shard_count(),
                engine.clone(),
                stats.clone(),
                reroute,
            )
            .await?;
            tasks.push(consumer);
            consumer_control = Some(control);
        }
        let purger = Purger::start(storage.clone(), config.storage.purge_delay_ms)?;
        // In a cluster, every node applies the catalog, user and key writes of the others.
        let catalog_log = match cluster.is_multi_node() {
            true => {
                let log = CatalogLog::new(kafka, cluster.me())?;
                tasks.push(
                    follow_catalog_log(
                        kafka.clone(),
                        cluster.me().to_owned(),
                        Replica {
                            engine: engine.clone(),
                            keys: keys.clone(),
                            conversations: chat.conversations.clone(),
                            purger: purger.clone(),
                            experiments: experiments.clone(),
                        },
                        log.stats.clone(),
                    )
                    .await?,
                );
                Some(log)
            }
            false => None,
        };
        // In a cluster, shards move live as the topology log says.
        if clustered {
            let mover = Mover {
                ownership: ownership.clone(),
                engine: engine.clone(),
                kafka: kafka.clone(),
                producer: Producer::new(kafka, &[])?,
                consumer: consumer_control,
                feed: feed_control,
                held: tokio::sync::Mutex::new(held),
                catalog_read: catalog_log.as_ref().map(|log| log.stats.caught_up.subscribe()),
            };
            let topologies = topology_log::follow(kafka, topology_offset)?;
            tasks.push(tokio::spawn(mover.run(topologies)));
        }
        let services = Arc::new(Services {
            engine,
            keys,
            training,
            models,
            search,
            // One model run per CPU: more at once only share the same cores.
            embedder: SharedEmbedder::new(
                embedder,
                std::thread::available_parallelism().map_or(1, |cpus| cpus.get()),
            ),
            embed_config: config.embed.clone(),
            chat,
            producer,
            stream_stats,
            ranking: RankingStats {
                state_deadline_ms: config.engine.state_read_deadline_ms,
                ..RankingStats::default()
            },
            cluster,
            catalog_log,
            purger,
            backups: Backups::new(&config.storage.backup_dir, &config.storage.data_dir),
            experiments,
            search_priors: Default::default(),
        });
        if services.embedder.understands_meaning() {
            tasks.push(tokio::spawn(services.clone().make_label_meanings()));
        }
        if let Some((key, secret)) = node_key {
            let services = services.clone();
            let key = KeyStore::replicable(&key, &secret);
            tasks.push(tokio::spawn(async move { services.publish_node_key(key).await }));
        }
        Ok(Node {
            services,
            storage,
            tasks,
        })
    }

    /// Stops the tasks, checkpoints, stops the actors and the learner, and flushes
    /// RocksDB.
    pub async fn stop(self) -> anyhow::Result<()> {
        for task in &self.tasks {
            task.abort();
        }
        let services = self.services;
        if let Err(error) = services.engine.checkpoint().await {
            tracing::error!(%error, "final checkpoint failed; the next start replays the log");
        }
        tracing::info!("stopping shard actors and flushing storage");
        let storage = self.storage;
        tokio::task::spawn_blocking(move || {
            services.chat.stop();
            services.engine.stop();
            services.search.stop();
            services.training.stop();
            services.experiments.stop_flushing();
            storage.flush()
        })
        .await??;
        Ok(())
    }
}

/// Runs a node until `shutdown` resolves: serves, then drains in-flight requests,
/// stops the shard actors and flushes RocksDB. Must run inside an actix `System`.
/// `admin_secret` is `RANKSTREAM_ADMIN_KEY`.
pub async fn run(
    config: Config,
    clock: SharedClock,
    admin_secret: Option<String>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let node = Node::start(&config, clock, admin_secret.as_deref()).await?;
    await_search_loaded(&node.services.search, SEARCH_LOAD_WAIT).await;
    let listener = TcpListener::bind(&config.server.bind)
        .await
        .with_context(|| format!("binding {}", config.server.bind))?;
    let address = listener.local_addr()?;
    println!("rankstream listening on http://{address}");
    std::io::stdout().flush()?;
    tracing::info!(%address, shards = node.services.engine.shard_count(), data_dir = %config.storage.data_dir.display(), "serving");
    let state = Arc::new(AppState {
        services: node.services.clone(),
        limits: RateLimits::new(config.auth.clone()),
        failed_auth: FailedAuth::new(config.auth.failures_per_minute),
        config: config.server.clone(),
        ready: AtomicBool::new(true),
        request_times: RequestTimes::default(),
        peers: Peers::new(node.services.cluster.connect_timeout_ms),
    });
    api::serve(listener, state, shutdown).await;
    node.stop().await?;
    tracing::info!("stopped");
    Ok(())
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

/// Folds recorded metric samples into their histogram buckets, so that they do not
/// pile up between scrapes.
async fn metrics_upkeep() {
    let mut interval = tokio::time::interval(crate::metrics::UPKEEP_INTERVAL);
    loop {
        interval.tick().await;
        crate::metrics::upkeep();
    }
}

/// Persists live state and moves the crash-replay point forward, periodically.
async fn checkpoint_loop(engine: Arc<Engine>, interval_ms: u64) {
    let mut interval = tokio::time::interval(Duration::from_millis(interval_ms));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        if let Err(error) = engine.checkpoint().await {
            tracing::warn!(%error, "checkpoint failed; retrying at the next interval");
        }
    }
}

/// Opens the search index under `<data_dir>/search`, subscribed to catalog changes
/// before it reads the catalog, so that nothing written meanwhile is missed.
fn open_search(config: &Config, engine: &Engine) -> anyhow::Result<Arc<SearchIndex>> {
    let (changes, change_feed) = crossbeam::channel::bounded(config.search.change_queue);
    engine.items().subscribe(changes);
    let directory = config.storage.data_dir.join("search");
    let index = SearchIndex::open(&directory, &config.search, engine.item_reader(), change_feed)
        .with_context(|| format!("opening the search index {}", directory.display()))?;
    Ok(Arc::new(index))
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

/// The configured embedder, loaded off the async workers (MiniLM reads ~90 MB).
async fn load_embedder(config: &Config) -> anyhow::Result<Arc<dyn crate::embed::Embedder>> {
    let embed = config.embed.clone();
    let embedder = tokio::task::spawn_blocking(move || crate::embed::from_config(&embed))
        .await?
        .with_context(|| {
            format!(
                "loading the embedding model (embed.model_dir = {:?})",
                config.embed.model_dir
            )
        })?;
    tracing::info!(
        model = embedder.name(),
        dimensions = embedder.dimensions(),
        "embedder ready"
    );
    Ok(embedder)
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
