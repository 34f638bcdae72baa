//! Recovery: replay of the log after the checkpoint (after a crash: events that
//! were acknowledged but whose effect was not yet in a persisted snapshot), and the
//! two phases of a checkpoint.

use std::collections::BTreeMap;

use actix::{Context, Handler, MessageResult};

use super::super::live_entry::{completion, Session, User};
use super::super::LiveStateError;
use super::messages::{CheckpointMark, CheckpointPersist, NextSeq, Replay, TakeOver};
use super::{decode_logged, ShardHost};
use crate::storage::{layout, Cf, Storage, StorageError};
use crate::topology::ShardId;

/// Events replayed per routing round.
const REPLAY_CHUNK: usize = 1024;

impl ShardHost {
    fn replay(&mut self) -> Result<u64, LiveStateError> {
        let checkpoint = read_checkpoint(&self.storage, self.shard)?;
        let prefix = layout::event_log_prefix(self.shard);
        let start = layout::event_log(self.shard, checkpoint + 1);
        let mut replayed = 0;
        let mut chunk = Vec::new();
        let storage = self.storage.clone();
        for entry in storage.scan_from(Cf::Events, &start, &prefix) {
            let (key, value) = entry?;
            let Some(seq) = layout::event_log_seq(&key) else {
                continue;
            };
            let event = decode_logged(self.shard, seq, &value)?;
            chunk.push(self.sequence(seq, event));
            self.last_applied = seq;
            replayed += 1;
            if chunk.len() == REPLAY_CHUNK {
                self.index_sessions(&chunk)?;
                self.route(std::mem::take(&mut chunk), completion().0);
            }
        }
        self.index_sessions(&chunk)?;
        self.route(chunk, completion().0);
        self.last_applied = self.last_applied.max(checkpoint).max(self.next_seq - 1);
        Ok(replayed)
    }
}

/// The checkpoint of a shard: every event at or below it is in persisted snapshots.
pub fn read_checkpoint(storage: &Storage, shard: ShardId) -> Result<u64, StorageError> {
    Ok(storage
        .get(Cf::State, &layout::checkpoint(shard))?
        .and_then(|bytes| bytes.try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(0))
}

impl Handler<Replay> for ShardHost {
    type Result = Result<u64, LiveStateError>;

    fn handle(&mut self, _: Replay, _: &mut Context<Self>) -> Self::Result {
        self.replay()
    }
}

impl Handler<CheckpointMark> for ShardHost {
    type Result = MessageResult<CheckpointMark>;

    fn handle(&mut self, _: CheckpointMark, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.last_applied)
    }
}

impl Handler<NextSeq> for ShardHost {
    type Result = MessageResult<NextSeq>;

    fn handle(&mut self, _: NextSeq, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.next_seq)
    }
}

impl Handler<TakeOver> for ShardHost {
    type Result = MessageResult<TakeOver>;

    fn handle(&mut self, TakeOver { next_seq }: TakeOver, _: &mut Context<Self>) -> Self::Result {
        self.next_seq = self.next_seq.max(next_seq);
        self.last_applied = self.next_seq - 1;
        MessageResult(self.last_applied)
    }
}

impl Handler<CheckpointPersist> for ShardHost {
    type Result = Result<BTreeMap<ShardId, u64>, LiveStateError>;

    fn handle(&mut self, _: CheckpointPersist, _: &mut Context<Self>) -> Self::Result {
        let sessions = self.persist_live::<Session>();
        let users = self.persist_live::<User>();
        sessions.and(users)?;
        Ok(self.unapplied.clone())
    }
}
