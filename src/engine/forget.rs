//! Forgetting a user on this node: their row and events, the anonymous events of
//! every session they had (sent before the uid was known), the live and stored
//! state of the user and of those sessions, and the index entries naming them.
//! Deleting writes markers; the bytes go from the files when the shards' key
//! ranges are purged ([`crate::storage::Storage::purge`]), which the caller
//! schedules for [`UserRemoval::shards`].

use std::collections::{BTreeMap, BTreeSet};

use memchr::memmem;
use serde::Serialize;

use super::catalog::CatalogError;
use super::catalog_shard::DeleteUser;
use super::shard_host::Wipe;
use super::{mailbox_error, Engine, LiveStateError};
use crate::domain::event::decode_stored;
use crate::domain::live_state::LiveState;
use crate::domain::live_state_id::LiveStateId;
use crate::storage::{layout, Cf, Storage, StorageError};
use crate::topology::ShardId;

/// Why a user's deletion failed: in the catalog (row, events) or in live state.
#[derive(Debug, thiserror::Error)]
pub enum DeleteUserError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    LiveState(#[from] LiveStateError),
}

impl From<StorageError> for DeleteUserError {
    fn from(error: StorageError) -> DeleteUserError {
        DeleteUserError::Catalog(error.into())
    }
}

/// What a user's deletion removed on this node.
#[derive(Debug, Clone, Default, Serialize)]
pub struct UserRemoval {
    /// Events that carried the uid.
    pub events: usize,
    /// Events of the user's sessions that carried only the sid.
    pub anonymous_events: usize,
    /// The user's sessions: their state and events are gone.
    pub sessions: Vec<String>,
    /// The shards whose key ranges held what was removed (to purge).
    #[serde(skip)]
    pub shards: BTreeSet<ShardId>,
}

impl Engine {
    /// Deletes a user and everything stored under them and their sessions: the
    /// row, the events that carry the uid, the sid-only events of every session the
    /// user had (named by their events, their live state or `known_sessions`), the
    /// live and stored state of the user and of those sessions, and session links.
    /// Before it answers, the consumer offsets already recorded are durable, so a
    /// restart does not consume the removed events again. A part that could not be
    /// removed fails the call (a retry finds the rest). `NotFound` when nothing
    /// named the user.
    pub async fn delete_user(&self, uid: &str, known_sessions: &[String]) -> Result<UserRemoval, DeleteUserError> {
        let home = self.shard_of(uid);
        // Events first: a crash in between leaves state that a retried delete finds.
        let rows = self.catalog.ask(home, DeleteUser { uid: uid.to_owned() }).await??;
        let user = self.wipe(LiveStateId::User(uid.to_owned())).await?;
        let mut sessions = rows.sessions;
        sessions.extend(user.sessions.iter().cloned());
        sessions.extend(known_sessions.iter().cloned());
        let mut removal = UserRemoval {
            events: rows.events_removed,
            shards: BTreeSet::from([home]),
            ..UserRemoval::default()
        };
        let mut found = rows.row_existed || rows.events_removed > 0 || user != LiveState::default();
        for sid in sessions {
            let shard = self.shard_of(&sid);
            let storage = self.storage.clone();
            let (owner, session) = (uid.to_owned(), sid.clone());
            let (anonymous, logs) =
                tokio::task::spawn_blocking(move || remove_session_events(&storage, shard, &session, &owner))
                    .await
                    .map_err(|error| LiveStateError::Unavailable(format!("session events scan failed: {error}")))??;
            let state = self.wipe(LiveStateId::Session(sid.clone())).await?;
            self.storage.delete(Cf::State, &layout::session_link(shard, &sid))?;
            found |= anonymous > 0 || state != LiveState::default();
            removal.anonymous_events += anonymous;
            removal.shards.insert(shard);
            removal.shards.extend(logs);
            removal.sessions.push(sid);
        }
        if !found {
            return Err(CatalogError::NotFound(format!("user {uid:?}")).into());
        }
        // Offsets go through the same ordered queue: those recorded before now are
        // durable once this empty commit is.
        self.commits.submit(Vec::new()).await?;
        Ok(removal)
    }

    async fn wipe(&self, key: LiveStateId) -> Result<LiveState, LiveStateError> {
        self.hosts
            .host(self.shard_of(key.id()))
            .send(Wipe(key))
            .await
            .map_err(mailbox_error)?
    }
}

/// Deletes the events of session `sid` (its shard is `shard`) that carry no uid or
/// `uid`, with their id entries and the session's index of where its events start.
/// Answers how many events went and the shards whose logs held them. Scans each log
/// from the session's first event on; an event is decoded only when its bytes name
/// the sid.
fn remove_session_events(
    storage: &Storage,
    shard: ShardId,
    sid: &str,
    uid: &str,
) -> Result<(usize, BTreeSet<ShardId>), StorageError> {
    let prefix = layout::session_events_prefix(shard, sid);
    let mut batch = storage.batch();
    let mut starts: BTreeMap<ShardId, u64> = BTreeMap::new();
    for entry in storage.scan_prefix(Cf::SessionEvents, &prefix) {
        let (index_key, _) = entry?;
        let log_key = &index_key[prefix.len()..];
        if let (Some(source), Some(seq)) = (layout::event_log_shard(log_key), layout::event_log_seq(log_key)) {
            let start = starts.entry(source).or_insert(seq);
            *start = (*start).min(seq);
        }
        batch.delete(Cf::SessionEvents, &index_key);
    }
    // The sid as binary records hold it, and as JSON ones (written by earlier
    // versions) spell it: a record holding neither is not the session's.
    let quoted = serde_json::to_vec(sid).expect("a string serializes");
    let needles = [memmem::Finder::new(sid.as_bytes()), memmem::Finder::new(&quoted)];
    let mut removed = 0;
    for (&source, &start) in &starts {
        let log = layout::event_log_prefix(source);
        for entry in storage.scan_from(Cf::Events, &layout::event_log(source, start), &log) {
            let (log_key, bytes) = entry?;
            if needles.iter().all(|needle| needle.find(&bytes).is_none()) {
                continue;
            }
            let Ok(owner) = decode_stored(&bytes) else {
                continue;
            };
            if owner.sid.as_deref() == Some(sid) && owner.uid.as_deref().is_none_or(|owner| owner == uid) {
                batch.delete(Cf::Events, &log_key);
                batch.delete(Cf::Events, &layout::event_id(source, &owner.id));
                removed += 1;
            }
        }
    }
    batch.commit()?;
    Ok((removed, starts.into_keys().collect()))
}
