//! The stages of a node, started in this order, each from what the earlier ones
//! built: seat (where the node stands in the cluster) → storage → learning →
//! engine → stream → cluster → services; HTTP ([`super::RunningNode::serve`]) comes last.
//! Every task a stage spawns is given the node's shutdown token and kept in the
//! stage's [`StageTasks`] (which the node holds); [`super::RunningNode::stop`] stops the
//! stages in reverse order.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::tasks::StageTasks;
use super::{load_models, load_topology};
use crate::api::{self, AppState, FailedAuth, LlmClient, Peers, RateLimits, RequestTimes};
use crate::api_keys::KeyStore;
use crate::clock::SharedClock;
use crate::config::Config;
use crate::domain::api_key::ApiKey;
use crate::embed::{Embedder, SharedEmbedder};
use crate::engine::conversation::Conversations;
use crate::engine::{Engine, HeldShards, Purger};
use crate::experiments::{Experiments, FLUSH_INTERVAL};
use crate::ranking::ModelRegistry;
use crate::search::SearchIndex;
use crate::service::admin::{AdminParts, AdminService};
use crate::service::backup::{BackupService, Backups};
use crate::service::catalog::{CatalogService, Replication};
use crate::service::chat::{start_conversations, ChatReads, ChatService, ReplyWriter};
use crate::service::cluster::claims::PeerClaims;
use crate::service::cluster::membership::{send_heartbeats, track};
use crate::service::cluster::moves::{phases_at_start, Mover};
use crate::service::cluster::Cluster;
use crate::service::embed::EmbedService;
use crate::service::events::EventService;
use crate::service::experiments::ExperimentService;
use crate::service::forget::ForgetService;
use crate::service::recommend::RankingService;
use crate::service::search::SearchService;
use crate::service::vocabulary::Vocabulary;
use crate::service::{RankingStats, Services};
use crate::storage::{Settings, Storage};
use crate::stream::catalog_log::{follow_catalog_log, CatalogLog, Replica};
use crate::stream::cluster::membership::{self as membership_log, HeartbeatSender};
use crate::stream::cluster::topology_log;
use crate::stream::learner_feed::{follow_other_partitions, FeedControl};
use crate::stream::{start_consumer, ConsumerControl, EventProducer, Producer, SharedStats};
use crate::topology::{Ownership, Topology};
use crate::training::Training;

/// Where the node stands: the topology file, the cluster's current topology (the
/// latest `cluster apply` published) and this node's place in it. Read before any
/// stage starts.
pub(super) struct Seat {
    /// The topology file (or the one-node default).
    pub(super) topology: Topology,
    /// More than one node: Kafka carries the events, the catalog and the topology.
    pub(super) clustered: bool,
    /// The epoch of the cluster's current topology (0: none published).
    pub(super) epoch: u64,
    /// Where the topology log ended when it was read: followed from there.
    pub(super) topology_offset: i64,
    /// This node's id.
    pub(super) me: String,
    /// Which node owns which shard, updated as the cluster moves shards.
    pub(super) ownership: Arc<Ownership>,
    /// Where a key lives and how to reach its owner.
    pub(super) cluster: Arc<Cluster>,
}

impl Seat {
    pub(super) fn load(config: &Config) -> anyhow::Result<Seat> {
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
        let cluster = Arc::new(Cluster::new(
            ownership.clone(),
            clustered,
            &config.node,
            &config.cluster,
        ));
        Ok(Seat {
            topology,
            clustered,
            epoch,
            topology_offset,
            me,
            ownership,
            cluster,
        })
    }
}

/// Stage 1: the data directory, and the API keys kept in it.
pub(super) struct StorageStage {
    /// The node's RocksDB; flushed and closed last.
    pub(super) storage: Storage,
    /// The API keys, kept in the data directory.
    pub(super) keys: Arc<KeyStore>,
    /// In a cluster, this node's own key (and its secret): it authenticates the
    /// node's calls to the others.
    pub(super) node_key: Option<(Arc<ApiKey>, String)>,
}

impl StorageStage {
    /// `admin_secret` is `RANKSTREAM_ADMIN_KEY`.
    pub(super) fn open(
        config: &Config,
        clock: &SharedClock,
        admin_secret: Option<&str>,
        seat: &Seat,
    ) -> anyhow::Result<StorageStage> {
        let retention = config.training.ranking_retention();
        let storage = Storage::open_with(&config.storage.data_dir, Settings::of(&config.storage, retention))
            .with_context(|| format!("opening the data directory {}", config.storage.data_dir.display()))?;
        let keys = Arc::new(KeyStore::load(storage.clone(), clock.clone())?);
        if let Some(secret) = keys.bootstrap_admin(admin_secret)? {
            println!("bootstrap admin key: {secret}");
            println!("(shown once; keep it, or set RANKSTREAM_ADMIN_KEY to choose your own)");
        }
        let node_key = match seat.cluster.is_multi_node() {
            true => Some(keys.node_key(seat.cluster.me())?),
            false => None,
        };
        Ok(StorageStage {
            storage,
            keys,
            node_key,
        })
    }
}

/// Stage 2: the learner thread, the models reading its snapshots, the embedder.
pub(super) struct LearningStage {
    /// The learner: stopped after the engine, which hands it every applied event.
    pub(super) training: Arc<Training>,
    /// The configured models, reading the learner's snapshots.
    pub(super) models: Arc<ModelRegistry>,
    /// The configured embedder (MiniLM or the hashed one).
    pub(super) embedder: Arc<dyn Embedder>,
}

impl LearningStage {
    pub(super) async fn start(config: &Config, seat: &Seat, storage: &StorageStage) -> anyhow::Result<LearningStage> {
        let training = Training::start(storage.storage.clone(), seat.topology.shards, config.training.clone())?;
        let models = Arc::new(load_models(config, &training)?);
        let embedder = load_embedder(config).await?;
        Ok(LearningStage {
            training,
            models,
            embedder,
        })
    }
}

/// Stage 3: the shard hosts and catalog shards with their live state recovered, the
/// experiments, the conversations, the search index and the purger; the periodic
/// checkpoints.
pub(super) struct EngineStage {
    /// The shard actors, their live state recovered.
    pub(super) engine: Arc<Engine>,
    /// Outcomes are attributed to experiments as the engine applies them.
    pub(super) experiments: Arc<Experiments>,
    /// The shards this node holds (in a cluster, the mover changes them).
    pub(super) held: HeldShards,
    /// The conversations (actors of their own; a shard move carries them too).
    pub(super) conversations: Arc<Conversations>,
    /// The catalog's full-text index, fed by catalog writes.
    pub(super) search: Arc<SearchIndex>,
    /// Compacts deleted users' records out of the files.
    pub(super) purger: Arc<Purger>,
    /// The node's clock (the one the engine stamps with).
    pub(super) clock: SharedClock,
}

impl EngineStage {
    /// Must run inside an actix `System`. Spawns the checkpoints, the metric upkeep
    /// and the purger into `tasks`.
    pub(super) async fn start(
        config: &Config,
        clock: SharedClock,
        seat: &Seat,
        storage: &StorageStage,
        learning: &LearningStage,
        shutdown: &CancellationToken,
        tasks: &mut StageTasks,
    ) -> anyhow::Result<EngineStage> {
        let Seat {
            ownership,
            cluster,
            epoch,
            me,
            clustered,
            ..
        } = seat;
        let (training, storage_handle) = (&learning.training, &storage.storage);
        let engine = Arc::new(Engine::start(
            storage_handle.clone(),
            ownership.clone(),
            clock.clone(),
            &config.engine,
            training.clone(),
        )?);
        training.attach_catalog(engine.items().clone());
        // Before any event flows: outcomes are attributed to experiments as they are applied.
        let experiments = Experiments::load(storage_handle.clone(), clock.clone())?;
        engine.observe_outcomes(experiments.clone());
        experiments
            .start_flushing(FLUSH_INTERVAL)
            .context("starting the experiment counts writer")?;
        // Which shards this node serves: on one node all; in a cluster, what it holds
        // (the shards of its topology at its first start) and is taking over.
        let held = match clustered {
            false => (0..seat.topology.shards).map(|shard| (shard, 0)).collect(),
            true => match engine.held_shards()? {
                Some(held) => held,
                None => {
                    // The cluster's first topology (the file's, or epoch 1 that `cluster
                    // init` published) gives a node its shards; a node new to a later one
                    // takes them over from their owners.
                    let first: HeldShards = match epoch {
                        0 | 1 => ownership
                            .current()
                            .owner_shards(me)
                            .iter()
                            .map(|&shard| (shard, *epoch))
                            .collect(),
                        _ => HeldShards::new(),
                    };
                    engine.store_held_shards(&first).await?;
                    first
                }
            },
        };
        let phases = phases_at_start(me, &ownership.current().topology, &held);
        ownership.update(|current| current.phases = phases);
        if let Some((_, secret)) = &storage.node_key {
            engine.set_session_claims(Arc::new(PeerClaims::new(
                cluster.clone(),
                Arc::new(Peers::new(cluster.connect_timeout_ms)),
                secret,
            )));
        }
        let conversations = start_conversations(&engine, &config.chat);
        let search = open_search(config, &engine)?;
        let replayed = engine.recover().await?;
        tracing::info!(replayed, "live state recovered");
        tasks.spawn(
            "checkpoints",
            checkpoint_loop(engine.clone(), config.engine.checkpoint_interval_ms, shutdown.clone()),
        );
        tasks.spawn("metrics upkeep", metrics_upkeep(shutdown.clone()));
        let (purger, purging) = Purger::start(storage_handle.clone(), config.storage.purge_delay_ms, shutdown.clone())?;
        tasks.adopt("purger", purging);
        Ok(EngineStage {
            engine,
            experiments,
            held,
            conversations,
            search,
            purger,
            clock,
        })
    }
}

/// Stage 4: Kafka, when configured: the REST topic's producer, the consumer of this
/// node's partitions and (in a cluster) the learner's feed of the other nodes'.
pub(super) struct StreamStage {
    /// Where REST events go when Kafka carries them.
    pub(super) producer: Option<EventProducer>,
    /// The consumer's counters, when Kafka is on.
    pub(super) stats: Option<SharedStats>,
    /// For the mover: which partitions the consumer reads.
    pub(super) consumer: Option<ConsumerControl>,
    /// For the mover: which partitions the learner's feed reads.
    pub(super) feed: Option<FeedControl>,
}

impl StreamStage {
    /// Spawns the consumer and the feed into `tasks`.
    pub(super) async fn start(
        config: &Config,
        seat: &Seat,
        learning: &LearningStage,
        engine: &EngineStage,
        shutdown: &CancellationToken,
        tasks: &mut StageTasks,
    ) -> anyhow::Result<StreamStage> {
        let kafka = &config.kafka;
        let (engine, training) = (&engine.engine, &learning.training);
        let producer = match (kafka.enabled, kafka.rest_topic.is_empty()) {
            (true, false) => Some(EventProducer::new(kafka, &kafka.rest_topic, engine.shard_count())?),
            _ => None,
        };
        let stats = kafka.enabled.then(SharedStats::default);
        let (mut consumer, mut feed) = (None, None);
        if let Some(stats) = stats.as_ref().filter(|_| !kafka.inputs.is_empty()) {
            let reroute = match seat.cluster.is_multi_node() {
                true => {
                    let (feeding, control) = follow_other_partitions(
                        kafka,
                        &engine.local_shards(),
                        engine.shard_count(),
                        engine.items().clone(),
                        training.clone(),
                        stats.clone(),
                        shutdown.clone(),
                    )?;
                    tasks.adopt("learner feed", feeding);
                    feed = Some(control);
                    Some(EventProducer::new(kafka, &kafka.rest_topic, engine.shard_count())?)
                }
                false => None,
            };
            let (consuming, control) = start_consumer(
                kafka.clone(),
                engine.local_shards(),
                engine.shard_count(),
                engine.clone(),
                stats.clone(),
                reroute,
                shutdown.clone(),
            )
            .await?;
            tasks.adopt("kafka consumer", consuming);
            consumer = Some(control);
        }
        Ok(StreamStage {
            producer,
            stats,
            consumer,
            feed,
        })
    }
}

/// Stage 5: in a cluster, the catalog log (the other nodes' catalog, user and key
/// writes applied here) and the shard mover following the topology log.
pub(super) struct ClusterStage {
    /// Where this node's catalog, user and key writes go for the others.
    pub(super) catalog_log: Option<CatalogLog>,
}

impl ClusterStage {
    /// Spawns the catalog log's follower, the topology log's follower and the mover
    /// into `tasks`; the mover takes the stream stage's controls.
    pub(super) async fn start(
        config: &Config,
        seat: &Seat,
        storage: &StorageStage,
        engine: &EngineStage,
        stream: &mut StreamStage,
        shutdown: &CancellationToken,
        tasks: &mut StageTasks,
    ) -> anyhow::Result<ClusterStage> {
        let kafka = &config.kafka;
        let cluster = &seat.cluster;
        // In a cluster, every node applies the catalog, user and key writes of the others.
        let catalog_log = match cluster.is_multi_node() {
            true => {
                // The writes a node skips in the log are its data directory's own:
                // back on an empty one, it applies those it took before.
                let origin = format!("{}@{}", cluster.me(), storage.storage.store_id()?);
                let log = CatalogLog::new(kafka, &origin)?;
                let following = follow_catalog_log(
                    kafka.clone(),
                    origin,
                    Replica {
                        engine: engine.engine.clone(),
                        keys: storage.keys.clone(),
                        conversations: engine.conversations.clone(),
                        purger: engine.purger.clone(),
                        experiments: engine.experiments.clone(),
                    },
                    log.stats.clone(),
                    shutdown.clone(),
                )
                .await?;
                tasks.adopt("catalog log follower", following);
                Some(log)
            }
            false => None,
        };
        // In a cluster, every node heartbeats and follows the others' heartbeats.
        if seat.clustered {
            let membership = cluster.membership.clone();
            let sender = HeartbeatSender::new(kafka, membership.timeout() / 4)?;
            tasks.spawn(
                "heartbeats",
                send_heartbeats(
                    sender,
                    seat.ownership.clone(),
                    membership.clone(),
                    engine.clock.clone(),
                    shutdown.clone(),
                ),
            );
            let (heartbeats, following) = membership_log::follow(kafka, cluster.me(), shutdown.clone())?;
            tasks.adopt("membership log follower", following);
            tasks.spawn("membership", track(membership, heartbeats));
        }
        // In a cluster, shards move live as the topology log says.
        if seat.clustered {
            let mover = Mover {
                ownership: seat.ownership.clone(),
                engine: engine.engine.clone(),
                kafka: kafka.clone(),
                producer: Producer::new(kafka, &[])?,
                consumer: stream.consumer.take(),
                feed: stream.feed.take(),
                held: tokio::sync::Mutex::new(engine.held.clone()),
                catalog_read: catalog_log.as_ref().map(|log| log.stats.caught_up.subscribe()),
                shutdown: shutdown.clone(),
            };
            let (topologies, following) = topology_log::follow(kafka, seat.topology_offset, shutdown.clone())?;
            tasks.adopt("topology log follower", following);
            tasks.spawn("shard mover", mover.run(topologies));
        }
        Ok(ClusterStage { catalog_log })
    }
}

/// Stage 6: the services over everything before, each given the handles it uses,
/// and their background work (the labels' meanings, the node key's publication)
/// spawned into `tasks`.
#[allow(clippy::too_many_arguments)] // one argument per stage before
pub(super) fn start_services(
    config: &Config,
    seat: &Seat,
    storage: &StorageStage,
    learning: &LearningStage,
    engine: &EngineStage,
    stream: StreamStage,
    cluster: ClusterStage,
    shutdown: &CancellationToken,
    tasks: &mut StageTasks,
) -> anyhow::Result<Arc<Services>> {
    let (models, training, index) = (&learning.models, &learning.training, &engine.search);
    let node_engine = &engine.engine;
    // One model run per CPU: more at once only share the same cores.
    let embedder = SharedEmbedder::new(
        learning.embedder.clone(),
        std::thread::available_parallelism().map_or(1, |cpus| cpus.get()),
    );
    let replication = Replication::new(cluster.catalog_log);
    let ranking_stats = Arc::new(RankingStats {
        state_deadline_ms: config.engine.state_read_deadline_ms,
        ..RankingStats::default()
    });
    let embed = Arc::new(EmbedService::new(embedder.clone(), config.embed.clone()));
    let experiments = Arc::new(ExperimentService::new(
        engine.experiments.clone(),
        models.clone(),
        replication.clone(),
    ));
    let ranking = Arc::new(RankingService::new(
        node_engine.clone(),
        models.clone(),
        training.clone(),
        ranking_stats.clone(),
        experiments.clone(),
    ));
    let words = Arc::new(Vocabulary::new(index.clone(), embedder.clone()));
    let search = Arc::new(SearchService::new(
        node_engine.items().clone(),
        index.clone(),
        embedder,
        training.clone(),
        ranking.clone(),
        words.clone(),
    ));
    let llm: Option<Arc<dyn ReplyWriter>> = match LlmClient::from_config(&config.chat)? {
        Some(client) => Some(Arc::new(client)),
        None => None,
    };
    let chat = Arc::new(ChatService::new(
        engine.conversations.clone(),
        &config.chat,
        llm,
        ChatReads {
            items: node_engine.items().clone(),
            clock: engine.clock.clone(),
            search: search.clone(),
            ranking: ranking.clone(),
            words: words.clone(),
        },
    ));
    let admin = Arc::new(AdminService::new(AdminParts {
        keys: storage.keys.clone(),
        engine: node_engine.clone(),
        training: training.clone(),
        stream_stats: stream.stats,
        ranking_stats,
        index: index.clone(),
        chat: chat.clone(),
        cluster: seat.cluster.clone(),
        purger: engine.purger.clone(),
        replication: replication.clone(),
    }));
    let services = Arc::new(Services {
        catalog: Arc::new(CatalogService::new(
            node_engine.catalog().clone(),
            replication.clone(),
            index.clone(),
            embed.clone(),
        )),
        forget: Arc::new(ForgetService::new(
            node_engine.clone(),
            engine.conversations.clone(),
            engine.purger.clone(),
            replication.clone(),
        )),
        events: Arc::new(EventService::new(
            node_engine.clone(),
            stream.producer,
            seat.cluster.clone(),
        )),
        ranking,
        search,
        chat,
        embed,
        experiments,
        admin,
        backups: Arc::new(BackupService::new(
            Backups::new(&config.storage.backup_dir, &config.storage.data_dir),
            node_engine.clone(),
        )),
        cluster: seat.cluster.clone(),
    });
    if words.understands_meaning() {
        tasks.spawn("label meanings", words.make_label_meanings(shutdown.clone()));
    }
    if let Some((key, secret)) = &storage.node_key {
        let (admin, shutdown) = (services.admin.clone(), shutdown.clone());
        let key = KeyStore::replicable(key, secret);
        tasks.spawn("node key publication", async move {
            admin.publish_node_key(key, shutdown).await
        });
    }
    Ok(services)
}

/// Stage 7: the HTTP frontend. Binds `server.bind` and spawns the accept loop into
/// `tasks`: it serves until the shutdown token is cancelled, then stops accepting and
/// returns once the requests in flight are answered (or `server.shutdown_grace_ms`
/// ran out). Answers the address it listens on.
pub(super) async fn start_http(
    config: &Config,
    services: &Arc<Services>,
    shutdown: &CancellationToken,
    tasks: &mut StageTasks,
) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind(&config.server.bind)
        .await
        .with_context(|| format!("binding {}", config.server.bind))?;
    let address = listener.local_addr()?;
    let state = Arc::new(AppState {
        services: services.clone(),
        limits: RateLimits::new(config.auth.clone()),
        failed_auth: FailedAuth::new(config.auth.failures_per_minute),
        config: config.server.clone(),
        ready: AtomicBool::new(true),
        request_times: RequestTimes::default(),
        peers: Peers::new(services.cluster.connect_timeout_ms),
    });
    tasks.spawn(
        "http server",
        api::serve(listener, state, shutdown.clone().cancelled_owned()),
    );
    Ok(address)
}

/// Persists live state and moves the crash-replay point forward, periodically, until
/// `shutdown` is cancelled (the node's stop takes the last checkpoint).
async fn checkpoint_loop(engine: Arc<Engine>, interval_ms: u64, shutdown: CancellationToken) {
    let mut interval = tokio::time::interval(Duration::from_millis(interval_ms));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        if let Err(error) = engine.checkpoint().await {
            tracing::warn!(%error, "checkpoint failed; retrying at the next interval");
        }
    }
}

/// Folds recorded metric samples into their histogram buckets, so that they do not
/// pile up between scrapes.
async fn metrics_upkeep(shutdown: CancellationToken) {
    let mut interval = tokio::time::interval(crate::metrics::UPKEEP_INTERVAL);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = interval.tick() => crate::metrics::upkeep(),
        }
    }
}

/// Opens the search index under `<data_dir>/search`, subscribed to catalog changes
/// before it reads the catalog, so that nothing written meanwhile is missed.
fn open_search(config: &Config, engine: &Engine) -> anyhow::Result<Arc<SearchIndex>> {
    let (changes, change_feed) = crossbeam::channel::bounded(config.search.change_queue);
    engine.items().subscribe(changes);
    let directory = config.storage.data_dir.join("search");
    let index = SearchIndex::open(&directory, &config.search, engine.items().clone(), change_feed)
        .with_context(|| format!("opening the search index {}", directory.display()))?;
    Ok(Arc::new(index))
}

/// The configured embedder, loaded off the async workers (MiniLM reads ~90 MB).
async fn load_embedder(config: &Config) -> anyhow::Result<Arc<dyn Embedder>> {
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
