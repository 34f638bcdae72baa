//! Live shard moves: a node follows the cluster's topology log and, for every epoch,
//! hands off the shards the new topology takes from it and takes over those it gives
//! it. Epochs are worked through in order; within one, every release goes first
//! (a release never waits for another node), then every take-over; different shards
//! are taken over in parallel (hand-offs go one by one: see `settle`), and shards
//! that do not move are never paused.
//!
//! Hand-off of shard `s` by its old owner:
//! 1. its consumer stops reading `s` once the batch in hand is applied and its
//!    offsets stored (routing already sends new requests for `s` to the new owner);
//! 2. `s` stops counting as served here, so no event is accepted on it any more, and
//!    the fence waits for the events in flight;
//! 3. the shard's live state is exported (actors persisted and stopped first) and
//!    produced to the changelog, ending with the `released` marker;
//! 4. what was handed off is deleted here in one write with the record of held shards,
//!    and the learner reads `s` from its partitions from the released offsets on.
//!
//! Take-over by the new owner: requests for `s` wait (within their deadline) while
//! it reads the hand-off of this epoch from the changelog, stores it in one write with
//! the record of held shards, continues the shard's log after the old owner's, takes
//! the partitions from the handed-off offsets, and serves.
//!
//! A node killed at any point resumes from the record of held shards: a shard held but
//! no longer owned is handed off again (the new owner keeps the last hand-off of the
//! epoch), a shard owned but not held is taken over again. A node told to stop (its
//! shutdown token) stops the same way at its next step or retry, without the kill.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::KafkaConfig;
use crate::engine::{Engine, HeldShards};
use crate::stream::cluster::changelog;
use crate::stream::cluster::topology_log::Applied;
use crate::stream::learner_feed::FeedControl;
use crate::stream::{ConsumerControl, Producer};
use crate::topology::{Ownership, Phase, ShardId, Topology};

/// Pause before retrying a step that failed for a passing reason (the broker down).
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// What a node's moves work with.
pub struct Mover {
    pub ownership: Arc<Ownership>,
    pub engine: Arc<Engine>,
    pub kafka: KafkaConfig,
    pub producer: Producer,
    pub consumer: Option<ConsumerControl>,
    pub feed: Option<FeedControl>,
    /// The shards this node holds, stored with every change (one change at a time).
    pub held: tokio::sync::Mutex<HeldShards>,
    /// Whether the catalog log is read up to where it ended when the node started:
    /// a node joining with an empty data directory has the catalog, users and keys
    /// before it takes a shard over (a shard served meanwhile would rank blind).
    pub catalog_read: Option<watch::Receiver<bool>>,
    /// The node's shutdown signal: moves stop at their next step or retry (a stopped
    /// move resumes at the next start from the record of held shards).
    pub shutdown: CancellationToken,
}

/// The phase of each shard at start, from the topology and what the node holds: a
/// shard owned and held is served, one owned and not held is taken over, one held and
/// not owned (a hand-off a crash cut short) is handed off again as it was stored,
/// without serving or consuming it meanwhile.
pub fn phases_at_start(me: &str, topology: &Topology, held: &HeldShards) -> BTreeMap<ShardId, Phase> {
    let owned = topology.node(me).map(|node| node.shards.clone()).unwrap_or_default();
    let mut phases: BTreeMap<ShardId, Phase> = held
        .keys()
        .map(|&shard| match owned.contains(&shard) {
            true => (shard, Phase::Serving),
            false => (shard, Phase::Releasing),
        })
        .collect();
    for shard in owned {
        phases.entry(shard).or_insert(Phase::Restoring);
    }
    phases
}

impl Mover {
    /// Finishes the moves of the current epoch, then follows `topologies`.
    /// Ends when the node's shutdown token is cancelled.
    pub async fn run(mut self, mut topologies: mpsc::UnboundedReceiver<Applied>) {
        self.settle().await;
        loop {
            let applied = tokio::select! {
                _ = self.shutdown.cancelled() => break,
                applied = topologies.recv() => applied,
            };
            let Some(applied) = applied else { break };
            let current = self.ownership.current();
            if applied.epoch <= current.epoch {
                continue;
            }
            let topology = match Topology::parse(&applied.text) {
                Ok(topology) if topology.shards == current.topology.shards => topology,
                Ok(topology) => {
                    tracing::error!(
                        epoch = applied.epoch,
                        shards = topology.shards,
                        "a published topology changes the shard count; ignored"
                    );
                    continue;
                }
                Err(error) => {
                    tracing::error!(epoch = applied.epoch, %error, "a published topology is invalid; ignored");
                    continue;
                }
            };
            let me = self.ownership.me().to_owned();
            let owned = topology.node(&me).map(|node| node.shards.clone()).unwrap_or_default();
            tracing::info!(epoch = applied.epoch, ?owned, "following a new topology");
            self.ownership.update(|current| {
                current.epoch = applied.epoch;
                current.topology = Arc::new(topology);
                for shard in owned {
                    current.phases.entry(shard).or_insert(Phase::Restoring);
                }
            });
            self.settle().await;
        }
        tracing::info!("shard mover stopped");
    }

    /// Waits `RETRY_PAUSE` before a retry; true when the node is stopping instead.
    async fn stopping_instead_of_retry(&self) -> bool {
        tokio::select! {
            _ = self.shutdown.cancelled() => true,
            _ = tokio::time::sleep(RETRY_PAUSE) => false,
        }
    }

    /// Hands off what this node no longer owns, then takes over what it now owns.
    async fn settle(&mut self) {
        let current = self.ownership.current();
        let me = self.ownership.me().to_owned();
        let releases: Vec<ShardId> = current
            .phases
            .keys()
            .copied()
            .filter(|&shard| current.owner_of(shard).id != me)
            .collect();
        let restores: Vec<ShardId> = current
            .phases
            .iter()
            .filter(|(_, phase)| **phase == Phase::Restoring)
            .map(|(&shard, _)| shard)
            .collect();
        let epoch = current.epoch;
        // One hand-off at a time: a session that goes with its user's shard leaves a
        // link in its sid's shard, which must not be handed off meanwhile.
        for shard in releases {
            if self.shutdown.is_cancelled() {
                return;
            }
            self.release(shard, epoch).await;
        }
        if let Some(read) = self.catalog_read.as_mut().filter(|_| !restores.is_empty()) {
            if !*read.borrow() {
                tracing::info!(?restores, "taking shards over once the catalog log is read");
            }
            // The sender lives as long as the node: an error is a node shutting down.
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = read.wait_for(|read| *read) => {}
            }
        }
        join_all(restores.iter().map(|&shard| self.restore(shard, epoch))).await;
    }

    /// Hands shard `shard` off at `epoch`.
    async fn release(&self, shard: ShardId, epoch: u64) {
        tracing::info!(shard, epoch, "handing a shard off");
        if let Some(consumer) = &self.consumer {
            consumer.release(shard).await;
        }
        self.ownership.update(|current| {
            current.phases.insert(shard, Phase::Releasing);
        });
        let offsets = loop {
            match self.hand_off(shard, epoch).await {
                Ok(offsets) => break offsets,
                Err(error) => {
                    tracing::warn!(shard, epoch, %error, "handing a shard off failed; retrying");
                    if self.stopping_instead_of_retry().await {
                        return;
                    }
                }
            }
        };
        self.ownership.update(|current| {
            current.phases.remove(&shard);
        });
        if let Some(feed) = &self.feed {
            feed.add(shard, offsets);
        }
        tracing::info!(shard, epoch, "shard handed off");
    }

    /// Steps 2 to 4 of a hand-off; answers the partitions' next offsets.
    async fn hand_off(&self, shard: ShardId, epoch: u64) -> Result<Vec<(String, i64)>, String> {
        let started = Instant::now();
        let _fence = self.engine.fence(shard).await.map_err(|error| error.to_string())?;
        let fenced = Instant::now();
        let export = self
            .engine
            .export_shard(shard)
            .await
            .map_err(|error| error.to_string())?;
        let exported = Instant::now();
        let mut offsets = Vec::new();
        for input in &self.kafka.inputs {
            let next = self
                .engine
                .stream_offset(shard, &input.topic)
                .map_err(|error| error.to_string())?;
            offsets.push((input.topic.clone(), next.unwrap_or(0)));
        }
        changelog::release(&self.producer, &self.kafka.changelog_topic, shard, epoch, &export)
            .await
            .map_err(|error| error.to_string())?;
        let produced = Instant::now();
        let mut held = self.held.lock().await;
        let mut after = held.clone();
        after.remove(&shard);
        self.engine
            .forget_shard(shard, &export, &after)
            .await
            .map_err(|error| error.to_string())?;
        *held = after;
        tracing::info!(
            shard,
            entries = export.state.len() + export.event_ids.len(),
            fence_ms = millis(fenced - started),
            export_ms = millis(exported - fenced),
            produce_ms = millis(produced - exported),
            forget_ms = millis(produced.elapsed()),
            "shard state handed off"
        );
        Ok(offsets)
    }

    /// Takes shard `shard` over at `epoch`.
    async fn restore(&self, shard: ShardId, epoch: u64) {
        tracing::info!(shard, epoch, "taking a shard over");
        while let Err(error) = self.take_over(shard, epoch).await {
            tracing::warn!(shard, epoch, %error, "taking a shard over failed; retrying");
            if self.stopping_instead_of_retry().await {
                return;
            }
        }
        if let Some(feed) = &self.feed {
            feed.remove(shard);
        }
        self.ownership.update(|current| {
            current.phases.insert(shard, Phase::Serving);
        });
        if let Some(consumer) = &self.consumer {
            while let Err(error) = consumer.acquire(shard).await {
                tracing::warn!(shard, %error, "consuming a taken-over shard's partitions failed; retrying");
                if self.stopping_instead_of_retry().await {
                    return;
                }
            }
        }
        tracing::info!(shard, epoch, "shard taken over");
    }

    /// Reads the hand-off and stores it with the record of held shards.
    async fn take_over(&self, shard: ShardId, epoch: u64) -> Result<(), String> {
        let started = Instant::now();
        // Only reads the changelog (the old owner may still be writing the hand-off):
        // left off when the node stops, read again at the next start.
        let export = tokio::select! {
            _ = self.shutdown.cancelled() => return Err("the node is stopping".into()),
            export = changelog::restore(&self.kafka, shard, epoch, |_| {}) => export,
        }
        .map_err(|error| error.to_string())?;
        let read = Instant::now();
        let mut held = self.held.lock().await;
        let mut after = held.clone();
        after.insert(shard, epoch);
        let entries = export.state.len() + export.event_ids.len();
        self.engine
            .import_shard(shard, export, &after)
            .await
            .map_err(|error| error.to_string())?;
        *held = after;
        tracing::info!(
            shard,
            entries,
            read_ms = millis(read - started),
            import_ms = millis(read.elapsed()),
            "shard state taken over"
        );
        Ok(())
    }
}

fn millis(duration: Duration) -> u64 {
    duration.as_millis() as u64
}
