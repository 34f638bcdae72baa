//! Live shard moves, the engine's part (the protocol is `service::cluster::moves`): fencing a
//! shard, exporting what its next owner needs, dropping it once handed off, and
//! importing it on the next owner.
//!
//! What moves with a shard `s`: its users' and anonymous sessions' states, its
//! conversations and session links, its consumer offsets, its event-id index (so an
//! event retried across the move is applied once), and the state of every session
//! copy on this node whose user is on `s` (a session lives with its user). A session
//! of `s` whose user stays with this node (or lives on a third node) stays where it
//! is: the next owner gets a link to the user instead. The event log stays: the shard's
//! log sequence continues on the next owner, so every applied mark stays meaningful.

use std::collections::BTreeMap;

use futures::future::join_all;
use tokio::sync::OwnedSemaphorePermit;

use crate::domain::live_state::LiveState;
use crate::engine::shard_host::{NextSeq, PassivateKeys, TakeOver};
use crate::engine::{mailbox_error, Engine, LiveStateError};
use crate::storage::layout::{self, StateKey};
use crate::storage::{Cf, Op, StorageError};
use crate::topology::ShardId;

/// What a shard's owner hands to the next one.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ShardExport {
    /// `state` entries (key, value).
    pub state: Vec<(Vec<u8>, Vec<u8>)>,
    /// Event-id index entries (key, value).
    pub event_ids: Vec<(Vec<u8>, Vec<u8>)>,
    /// The sequence the shard's log gives next; the next owner continues after it.
    pub next_seq: u64,
}

impl Engine {
    /// Waits for every event in flight on `shard` and then holds all its credits: no
    /// event is accepted on it until the permit drops. Call it once the shard no
    /// longer counts as served (ingest checks that again after taking its credits).
    pub async fn fence(&self, shard: ShardId) -> Result<OwnedSemaphorePermit, LiveStateError> {
        self.in_flight[shard as usize]
            .clone()
            .acquire_many_owned(self.in_flight_limit)
            .await
            .map_err(|_| LiveStateError::Unavailable(format!("shard {shard} is stopping")))
    }

    /// Everything the next owner of `shard` needs, with the live keys it concerns
    /// persisted and dropped first (the shard must be fenced).
    pub async fn export_shard(&self, shard: ShardId) -> Result<ShardExport, LiveStateError> {
        self.checkpoint().await?;
        self.hosts
            .host(shard)
            .send(PassivateKeys { sessions: None })
            .await
            .map_err(mailbox_error)?;
        let mut export = ShardExport::default();
        let mut linked = std::collections::HashSet::new();
        let mut entries = Vec::new();
        for entry in self.storage.scan_prefix(Cf::State, &layout::state_prefix(shard)) {
            let (key, value) = entry?;
            if let Some((_, StateKey::SessionLink(sid))) = layout::parse_state_key(&key) {
                linked.insert(sid.to_owned());
            }
            entries.push((key.into_vec(), value.into_vec()));
        }
        for (key, value) in entries {
            match layout::parse_state_key(&key) {
                None | Some((_, StateKey::Checkpoint)) => continue,
                Some((_, StateKey::Session(sid))) if linked.contains(sid) => continue,
                Some((_, StateKey::Session(sid))) => match decode(sid, &value)?.uid {
                    // A session lives with its user: it stays here with a user of a shard
                    // this node keeps, or goes with the user's shard when that moves (see
                    // `session_copies_of`); the next owner links to the user.
                    Some(uid) if self.shard_of(&uid) != shard => {
                        export.state.push((layout::session_link(shard, sid), uid.into_bytes()));
                    }
                    _ => export.state.push((key, value)),
                },
                Some(_) => export.state.push((key, value)),
            }
        }
        // Copies of sessions whose sid's shard is another one, of users of `shard`.
        for (other, sids) in self.session_copies_of(shard)? {
            self.hosts
                .host(other)
                .send(PassivateKeys {
                    sessions: Some(sids.clone()),
                })
                .await
                .map_err(mailbox_error)?;
            for sid in sids {
                let key = layout::session_state(other, &sid);
                if let Some(value) = self.storage.get(Cf::State, &key)? {
                    export.state.push((key, value));
                }
            }
        }
        for entry in self.storage.scan_prefix(Cf::Events, &layout::event_id_prefix(shard)) {
            let (key, value) = entry?;
            export.event_ids.push((key.into_vec(), value.into_vec()));
        }
        export.next_seq = self.hosts.host(shard).send(NextSeq).await.map_err(mailbox_error)?;
        Ok(export)
    }

    /// Per other shard, the sessions stored here under it whose user is on `shard`.
    fn session_copies_of(&self, shard: ShardId) -> Result<Vec<(ShardId, Vec<String>)>, StorageError> {
        let mut copies = Vec::new();
        for other in (0..self.shard_count).filter(|&other| other != shard) {
            let mut sids = Vec::new();
            for entry in self.storage.scan_prefix(Cf::State, &layout::state_prefix(other)) {
                let (key, value) = entry?;
                let Some((_, StateKey::Session(sid))) = layout::parse_state_key(&key) else {
                    continue;
                };
                let state = decode(sid, &value)?;
                if state.uid.is_some_and(|uid| self.shard_of(&uid) == shard) {
                    sids.push(sid.to_owned());
                }
            }
            if !sids.is_empty() {
                copies.push((other, sids));
            }
        }
        Ok(copies)
    }

    /// Once the next owner has `export` durably: deletes here what was handed off (a
    /// session kept here for its user was not), and links the sessions of shards served
    /// here that went with their user.
    /// `held` (what this node holds after) is stored in the same write.
    pub async fn forget_shard(
        &self,
        shard: ShardId,
        export: &ShardExport,
        held: &HeldShards,
    ) -> Result<(), LiveStateError> {
        let mut ops = vec![held_op(held)];
        for (key, value) in &export.state {
            match layout::parse_state_key(key) {
                Some((owner, StateKey::Session(sid)))
                    if owner != shard && self.ownership.current().phases.contains_key(&owner) =>
                {
                    if let Ok(state) = decode(sid, value) {
                        if let Some(uid) = state.uid {
                            ops.push(Op::Put {
                                cf: Cf::State,
                                key: layout::session_link(owner, sid),
                                value: uid.into_bytes(),
                            });
                        }
                    }
                    ops.push(Op::Delete {
                        cf: Cf::State,
                        key: key.clone(),
                    });
                }
                _ => ops.push(Op::Delete {
                    cf: Cf::State,
                    key: key.clone(),
                }),
            }
        }
        Ok(self.commits.submit(ops).await?)
    }

    /// Takes `shard` over from its previous owner: drops what this node kept of it from
    /// an earlier ownership, stores `export`, and continues the shard's log after the
    /// previous owner's. Sessions of `shard` this node holds for its own users stay.
    /// `held` (what this node holds after) is stored in the same write.
    pub async fn import_shard(
        &self,
        shard: ShardId,
        export: ShardExport,
        held: &HeldShards,
    ) -> Result<(), LiveStateError> {
        self.hosts
            .host(shard)
            .send(PassivateKeys { sessions: None })
            .await
            .map_err(mailbox_error)?;
        let mut ops = Vec::new();
        for entry in self.storage.scan_prefix(Cf::State, &layout::state_prefix(shard)) {
            let (key, value) = entry?;
            let stale = match layout::parse_state_key(&key) {
                Some((_, StateKey::Session(sid))) => match decode(sid, &value) {
                    // A session of a user this node serves or is taking over stays.
                    Ok(LiveState { uid: Some(uid), .. }) => {
                        !self.ownership.current().phases.contains_key(&self.shard_of(&uid))
                    }
                    _ => true,
                },
                Some((_, StateKey::Checkpoint)) | None => false,
                Some(_) => true,
            };
            if stale {
                ops.push(Op::Delete {
                    cf: Cf::State,
                    key: key.into_vec(),
                });
            }
        }
        // Session copies under other shards replace what their actors here hold.
        let mut copies: std::collections::BTreeMap<ShardId, Vec<String>> = Default::default();
        for (key, _) in &export.state {
            if let Some((owner, StateKey::Session(sid))) = layout::parse_state_key(key) {
                if owner != shard {
                    copies.entry(owner).or_default().push(sid.to_owned());
                }
            }
        }
        let passivations = copies
            .into_iter()
            .map(|(owner, sids)| self.hosts.host(owner).send(PassivateKeys { sessions: Some(sids) }));
        for passivated in join_all(passivations).await {
            passivated.map_err(mailbox_error)?;
        }
        let state = export.state.into_iter().map(|(key, value)| Op::Put {
            cf: Cf::State,
            key,
            value,
        });
        let ids = export.event_ids.into_iter().map(|(key, value)| Op::Put {
            cf: Cf::Events,
            key,
            value,
        });
        ops.extend(state.chain(ids));
        let mark = self
            .hosts
            .host(shard)
            .send(TakeOver {
                next_seq: export.next_seq,
            })
            .await
            .map_err(mailbox_error)?;
        ops.push(Op::Put {
            cf: Cf::State,
            key: layout::checkpoint(shard),
            value: mark.to_be_bytes().to_vec(),
        });
        ops.push(held_op(held));
        Ok(self.commits.submit(ops).await?)
    }
}

/// The shards whose live state a node holds, with the epoch it got each at.
pub type HeldShards = BTreeMap<ShardId, u64>;

impl Engine {
    /// The shards this node holds (`None` before a cluster node's first start).
    pub fn held_shards(&self) -> Result<Option<HeldShards>, StorageError> {
        let Some(bytes) = self.storage.get(Cf::Meta, layout::HELD_SHARDS)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|error| StorageError::Corrupt {
                key: "held shards".into(),
                reason: error.to_string(),
            })
    }

    /// Records the shards this node holds.
    pub async fn store_held_shards(&self, held: &HeldShards) -> Result<(), StorageError> {
        self.commits.submit(vec![held_op(held)]).await
    }
}

fn held_op(held: &HeldShards) -> Op {
    Op::Put {
        cf: Cf::Meta,
        key: layout::HELD_SHARDS.to_vec(),
        value: serde_json::to_vec(held).expect("held shards serialize"),
    }
}

fn decode(sid: &str, value: &[u8]) -> Result<LiveState, StorageError> {
    postcard::from_bytes(value).map_err(|error| StorageError::Corrupt {
        key: format!("session {sid}"),
        reason: error.to_string(),
    })
}
