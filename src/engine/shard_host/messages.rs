//! The messages a `ShardHost` takes: from the engine (ingest, state reads, wipes,
//! replay, checkpoints) and from other hosts (a session's events, a session to
//! absorb). Their handlers sit next to the work they start: `ingest.rs`,
//! `state.rs`, `recovery.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix::Message;

use super::super::live_entry::{Completion, Stitched};
use super::super::LiveStateError;
use crate::domain::event::{Event, SequencedEvent};
use crate::domain::live_state::LiveState;
use crate::domain::live_state_id::LiveStateId;
use crate::topology::ShardId;

/// Accept events whose routing key this shard owns. Answers, per event, whether it
/// was a duplicate of one already accepted (and so not applied again).
pub struct Ingest(pub Vec<Event>);

impl Message for Ingest {
    type Result = Result<Vec<bool>, LiveStateError>;
}

/// Events of sessions living on this shard, from another shard's log.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RouteSessions(pub Vec<(String, Vec<Arc<SequencedEvent>>)>, pub Completion);

/// A user on this shard absorbs an anonymous session's signals.
#[derive(Message)]
#[rtype(result = "()")]
pub struct AbsorbSession(pub Stitched);

/// Cluster mode: a session claimed from the node owning its shard starts here from
/// `state`, unless it already has a state here.
#[derive(Message)]
#[rtype(result = "()")]
pub struct AdoptSession {
    pub sid: String,
    pub state: Box<LiveState>,
}

/// A live move: persists and drops the live entries of these sessions, or every live
/// key of the shard when `None`; answers once they are persisted (a key that could
/// not persist stays live).
pub struct PassivateKeys {
    pub sessions: Option<Vec<String>>,
}

impl Message for PassivateKeys {
    type Result = ();
}

/// A live move: the shard's log continues here after `next_seq` (the sequence the
/// previous owner would have given next), and nothing of the log before is replayed;
/// answers the new checkpoint mark.
pub struct TakeOver {
    pub next_seq: u64,
}

impl Message for TakeOver {
    type Result = u64;
}

/// The sequence the shard's log gives next.
pub struct NextSeq;

impl Message for NextSeq {
    type Result = u64;
}

/// What a reader makes of a state.
pub type Projection<R> = Box<dyn FnOnce(&LiveState) -> R + Send>;

/// A view of the state of a key and whether it is live; `None` if it has none.
pub struct ReadState<R>(pub LiveStateId, pub Projection<R>);

impl<R: Send + 'static> Message for ReadState<R> {
    type Result = Result<Option<(R, bool)>, LiveStateError>;
}

/// Drops a live key without persisting and deletes its stored state; answers
/// with the final state (empty if there was none). A failed delete answers the
/// error and leaves the state in place.
pub struct Wipe(pub LiveStateId);

impl Message for Wipe {
    type Result = Result<LiveState, LiveStateError>;
}

/// Replays the log after the checkpoint; answers how many events were replayed.
pub struct Replay;

impl Message for Replay {
    type Result = Result<u64, LiveStateError>;
}

/// Checkpoint, phase one: the highest sequence applied so far.
pub struct CheckpointMark;

impl Message for CheckpointMark {
    type Result = u64;
}

/// Checkpoint, phase two: every live key persists. Answers, per source shard, the
/// lowest sequence of events not yet in a persisted state (whose state could not be
/// loaded); fails when a live key could not persist.
pub struct CheckpointPersist;

impl Message for CheckpointPersist {
    type Result = Result<BTreeMap<ShardId, u64>, LiveStateError>;
}
