//! Which nodes are up: every node heartbeats to the membership log
//! (`stream::cluster::membership`) every fifth of the failure timeout, and each node
//! judges the others by when it last received one, on its own monotonic clock (no
//! skew between machines enters the verdict). A node is up while its last heartbeat
//! arrived within the timeout; one never heard of is judged only once this node has
//! listened for a whole timeout.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::stream::cluster::membership::{Heartbeat, HeartbeatSender};
use crate::topology::Ownership;

/// A node's health as the membership view judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    Up,
    Down,
    /// Not heard of yet, and this node has not listened for a whole timeout.
    Unknown,
}

/// This node's view of the others' heartbeats.
pub struct Membership {
    timeout: Duration,
    started: Instant,
    seen: Mutex<BTreeMap<String, Seen>>,
}

struct Seen {
    heartbeat: Heartbeat,
    received: Instant,
    /// Heartbeats received from this incarnation.
    count: u64,
}

impl Membership {
    /// A view that declares a node down `timeout` after its last heartbeat.
    pub fn new(timeout: Duration) -> Membership {
        Membership::listening_since(timeout, Instant::now())
    }

    /// A view that has listened since `started`.
    fn listening_since(timeout: Duration, started: Instant) -> Membership {
        Membership {
            timeout,
            started,
            seen: Mutex::new(BTreeMap::new()),
        }
    }

    /// The timeout nodes are judged by.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Takes in a heartbeat received at `at`.
    pub fn record(&self, heartbeat: Heartbeat, at: Instant) {
        let mut seen = self.seen.lock();
        match seen.get_mut(&heartbeat.node) {
            Some(known) => {
                known.count = match known.heartbeat.incarnation == heartbeat.incarnation {
                    true => known.count + 1,
                    false => 1,
                };
                known.heartbeat = heartbeat;
                known.received = at;
            }
            None => {
                let node = heartbeat.node.clone();
                seen.insert(
                    node,
                    Seen {
                        heartbeat,
                        received: at,
                        count: 1,
                    },
                );
            }
        }
    }

    /// Node `id`'s health at `now`.
    pub fn health(&self, id: &str, now: Instant) -> Health {
        match self.seen.lock().get(id) {
            Some(seen) if now.saturating_duration_since(seen.received) <= self.timeout => Health::Up,
            Some(_) => Health::Down,
            None if now.saturating_duration_since(self.started) <= self.timeout => Health::Unknown,
            None => Health::Down,
        }
    }

    /// Each of `nodes` with its health and last heartbeat, for the stats.
    pub fn to_json<'a>(&self, nodes: impl IntoIterator<Item = &'a str>, now: Instant) -> Value {
        let members: Vec<Value> = nodes
            .into_iter()
            .map(|id| {
                let health = self.health(id, now);
                let seen = self.seen.lock();
                let last = seen.get(id);
                json!({
                    "id": id,
                    "health": health,
                    "last_heartbeat_ms_ago": last.map(|seen| now.saturating_duration_since(seen.received).as_millis() as u64),
                    "incarnation": last.map(|seen| seen.heartbeat.incarnation),
                    "heartbeats": last.map(|seen| seen.count),
                    "epoch": last.map(|seen| seen.heartbeat.epoch),
                })
            })
            .collect();
        Value::Array(members)
    }
}

/// Heartbeats of this node every fifth of the membership's timeout, until `shutdown`.
pub async fn send_heartbeats(
    sender: HeartbeatSender,
    ownership: Arc<Ownership>,
    membership: Arc<Membership>,
    clock: SharedClock,
    shutdown: CancellationToken,
) {
    let incarnation = rand::random::<u64>();
    let mut ticks = tokio::time::interval(membership.timeout() / 5);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let current = ownership.current();
        let heartbeat = Heartbeat {
            node: ownership.me().to_owned(),
            incarnation,
            sent_at_ms: clock.now_millis(),
            epoch: current.epoch,
            serving: ownership.serving(),
        };
        if let Err(error) = sender.send(&heartbeat).await {
            tracing::warn!(%error, "a heartbeat was not acknowledged by the broker");
        }
    }
}

/// Takes every heartbeat the membership log delivers into `membership`, until the
/// log's follower ends.
pub async fn track(membership: Arc<Membership>, mut heartbeats: mpsc::UnboundedReceiver<Heartbeat>) {
    while let Some(heartbeat) = heartbeats.recv().await {
        membership.record(heartbeat, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heartbeat(node: &str, incarnation: u64) -> Heartbeat {
        Heartbeat {
            node: node.to_owned(),
            incarnation,
            sent_at_ms: 0,
            epoch: 3,
            serving: vec![0, 1],
        }
    }

    #[test]
    fn a_node_is_up_within_the_timeout_of_its_last_heartbeat_and_down_after() {
        let start = Instant::now();
        let membership = Membership::listening_since(Duration::from_secs(10), start);
        assert_eq!(membership.health("b", start), Health::Unknown);
        membership.record(heartbeat("b", 7), start + Duration::from_secs(1));
        assert_eq!(membership.health("b", start + Duration::from_secs(11)), Health::Up);
        assert_eq!(
            membership.health("b", start + Duration::from_millis(11_001)),
            Health::Down
        );
        // Never heard of: unknown while this node has listened less than a timeout.
        assert_eq!(membership.health("c", start + Duration::from_secs(10)), Health::Unknown);
        assert_eq!(
            membership.health("c", start + Duration::from_millis(10_001)),
            Health::Down
        );
        // A heartbeat brings a down node back; a new incarnation counts anew.
        membership.record(heartbeat("b", 7), start + Duration::from_secs(20));
        membership.record(heartbeat("b", 8), start + Duration::from_secs(21));
        let now = start + Duration::from_secs(22);
        assert_eq!(membership.health("b", now), Health::Up);
        let view = membership.to_json(["b", "c"], now);
        assert_eq!(view[0]["health"], "up");
        assert_eq!(view[0]["heartbeats"], 1);
        assert_eq!(view[0]["incarnation"], 8);
        assert_eq!(view[0]["last_heartbeat_ms_ago"], 1000);
        assert_eq!(view[1]["health"], "down");
        assert_eq!(view[1]["last_heartbeat_ms_ago"], Value::Null);
    }
}
