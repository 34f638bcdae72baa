//! Ingest and group commit: events get log sequence numbers, wait for the commit
//! in flight, become durable together, and are then applied in sequence order to
//! their users here and their sessions wherever the sid lives, and handed to the
//! learner. Also the handlers of other hosts' hand-overs (a session's events, a
//! session to absorb).

use std::collections::BTreeMap;
use std::future::ready;
use std::sync::Arc;

use actix::{ActorFutureExt, AsyncContext, Context, Handler, ResponseFuture, WrapFuture};
use futures::future::{BoxFuture, FutureExt, Shared};
use indexmap::IndexMap;
use rustc_hash::FxBuildHasher;
use tokio::sync::oneshot;

use super::super::live_entry::{completion, Completion, Session, User};
use super::super::LiveStateError;
use super::messages::{AbsorbSession, Ingest, RouteSessions};
use super::{PendingIngest, ShardHost, StoredSignal};
use crate::domain::event::{encode_stored, Event, SequencedEvent};
use crate::storage::{layout, Cf, Op, StorageError};
use crate::topology::ShardId;

impl ShardHost {
    /// Sends the queued events to the commit thread; the next batch waits for this one.
    fn flush(&mut self, context: &mut Context<Self>) {
        let mut batch = std::mem::take(&mut self.pending);
        let ops: Vec<Op> = batch
            .iter_mut()
            .flat_map(|pending| std::mem::take(&mut pending.ops))
            .collect();
        self.commit_in_flight = true;
        let write = self.commits.submit(ops);
        context.spawn(
            write
                .into_actor(self)
                .map(move |result, host, context| host.on_durable(context, batch, result)),
        );
    }

    fn on_durable(&mut self, context: &mut Context<Self>, batch: Vec<PendingIngest>, result: Result<(), StorageError>) {
        let mut replies = Vec::with_capacity(batch.len());
        let mut sequenced = Vec::new();
        for pending in batch {
            for (seq, event) in pending.events {
                self.ids_in_flight.remove(&event.id);
                if result.is_ok() {
                    sequenced.push(self.sequence(seq, event));
                }
            }
            let _ = pending
                .stored
                .send(result.as_ref().map(drop).map_err(ToString::to_string));
            replies.push(pending.reply);
        }
        if let Some(last) = sequenced.last() {
            self.last_applied = last.seq;
        }
        let (done, applied) = completion();
        if let Err(error) = self.index_sessions(&sequenced) {
            tracing::error!(shard = self.shard, %error, "indexing the batch's sessions failed");
            done.fail();
        }
        let learned = self.feed_learner(sequenced.clone());
        self.route(sequenced, done);
        let error = result.err().map(|error| error.to_string());
        // Answer once every shard this batch reached has applied it and the learner
        // took it: a learner that falls behind holds ingest back.
        context.spawn(
            async move {
                let all_applied = applied.await;
                learned.await;
                for reply in replies {
                    let _ = reply.send(match (&error, all_applied) {
                        (None, true) => Ok(()),
                        (None, false) => Err(LiveStateError::Unavailable(
                            "the events are stored, but some live state could not be loaded to apply them; \
                             they are applied again at the next start"
                                .into(),
                        )),
                        (Some(error), _) => Err(LiveStateError::Storage(StorageError::Commit(format!(
                            "event log write failed: {error}"
                        )))),
                    });
                }
            }
            .into_actor(self),
        );
        self.commit_in_flight = false;
        if !self.pending.is_empty() {
            self.flush(context);
        }
    }

    /// Indexes where each session's events start in this shard's log (what a
    /// session's state is rebuilt from when its snapshot is unreadable): one entry
    /// for the first event of a sid this host has not indexed lately, not one per
    /// event; a rebuild scans the log from the entries on. Written here, off the group
    /// commit and without the WAL, like snapshots: the checkpoint flushes the index
    /// before it moves the replay point, and a replay after a crash (which starts with
    /// nothing indexed) writes again the entries of the events it replays.
    pub(super) fn index_sessions(&mut self, events: &[Arc<SequencedEvent>]) -> Result<(), StorageError> {
        let mut batch = self.storage.batch();
        for sequenced in events {
            let Some(sid) = &sequenced.event.sid else { continue };
            if self.indexed_sessions.get(sid.as_str()).is_some() {
                continue;
            }
            let log_key = layout::event_log(sequenced.source, sequenced.seq);
            batch.put(
                Cf::SessionEvents,
                &layout::session_event(self.router.shard_of(sid), sid, &log_key),
                &[],
            );
            self.indexed_sessions.put(sid.clone(), ());
        }
        if batch.is_empty() {
            return Ok(());
        }
        batch.commit_unlogged().inspect_err(|_| {
            // Unwritten entries must be written again by the next events.
            self.indexed_sessions.clear();
        })
    }

    /// Hands a durable batch to the learner after the batches before it, so that it
    /// learns the log in order; resolves once the learner took this batch.
    fn feed_learner(&mut self, events: Vec<Arc<SequencedEvent>>) -> Shared<BoxFuture<'static, ()>> {
        let previous = self.learner_feed.clone();
        let accept = self.learner.accept(events);
        let fed = async move {
            previous.await;
            accept.await;
        }
        .boxed()
        .shared();
        self.learner_feed = fed.clone();
        fed
    }

    pub(super) fn sequence(&self, seq: u64, event: Event) -> Arc<SequencedEvent> {
        let attributes = self.items.affinity_attributes(&event);
        Arc::new(SequencedEvent {
            source: self.shard,
            seq,
            event,
            attributes,
        })
    }

    /// Hands events, in sequence order, to their user here and their session
    /// wherever the sid lives.
    pub(super) fn route(&mut self, events: Vec<Arc<SequencedEvent>>, done: Completion) {
        let mut users = Grouped::default();
        let mut local_sessions = Grouped::default();
        let mut remote_sessions: BTreeMap<ShardId, Grouped> = BTreeMap::new();
        for sequenced in events {
            if let Some(uid) = &sequenced.event.uid {
                users.push(uid, sequenced.clone());
            }
            if let Some(sid) = &sequenced.event.sid {
                match self.router.shard_of(sid) {
                    shard if shard == self.shard => local_sessions.push(sid, sequenced.clone()),
                    shard => remote_sessions.entry(shard).or_default().push(sid, sequenced.clone()),
                }
            }
        }
        for (uid, events) in users.0 {
            self.apply::<User>(&uid, &events, &done);
        }
        for (sid, events) in local_sessions.0 {
            self.apply::<Session>(&sid, &events, &done);
        }
        // Bounded by what is in flight: every message holds `done`, and the batch's
        // callers (who wait for it) are themselves held back by their hosts' mailboxes.
        for (shard, sessions) in remote_sessions {
            self.router
                .host(shard)
                .do_send(RouteSessions(sessions.0.into_iter().collect(), done.clone()));
        }
    }
}

/// Events grouped by key, keys in first-seen order, events in sequence order.
#[derive(Default)]
struct Grouped(IndexMap<String, Vec<Arc<SequencedEvent>>, FxBuildHasher>);

impl Grouped {
    fn push(&mut self, key: &str, event: Arc<SequencedEvent>) {
        match self.0.get_mut(key) {
            Some(events) => events.push(event),
            None => {
                self.0.insert(key.to_owned(), vec![event]);
            }
        }
    }
}

impl Handler<Ingest> for ShardHost {
    type Result = ResponseFuture<Result<Vec<bool>, LiveStateError>>;

    fn handle(&mut self, Ingest(events): Ingest, context: &mut Context<Self>) -> Self::Result {
        let id_keys: Vec<Vec<u8>> = events
            .iter()
            .map(|event| layout::event_id(self.shard, &event.id))
            .collect();
        let stored = match self.storage.multi_get(Cf::Events, &id_keys) {
            Ok(stored) => stored,
            Err(error) => return Box::pin(ready(Err(error.into()))),
        };
        let mut duplicates = Vec::with_capacity(events.len());
        let mut accepted = Vec::with_capacity(events.len());
        // An event is three writes: its log entry, its id and its user's index.
        let mut ops = Vec::with_capacity(3 * events.len());
        // The copies accepted earlier and not yet stored: this answer waits for them.
        let mut earlier: Vec<StoredSignal> = Vec::new();
        let (stored_sender, stored_signal) = oneshot::channel();
        let stored_signal: StoredSignal = stored_signal
            .map(|told| told.unwrap_or_else(|_| Err("the shard host stopped".into())))
            .boxed()
            .shared();
        for ((event, stored), id_key) in events.into_iter().zip(stored).zip(id_keys) {
            if stored.is_some() {
                duplicates.push(true);
                continue;
            }
            if let Some(first) = self.ids_in_flight.get(&event.id) {
                if !earlier.iter().any(|known| known.ptr_eq(first)) {
                    earlier.push(first.clone());
                }
                duplicates.push(true);
                continue;
            }
            self.ids_in_flight.insert(event.id.clone(), stored_signal.clone());
            duplicates.push(false);
            let seq = self.next_seq;
            self.next_seq += 1;
            let log_key = layout::event_log(self.shard, seq);
            if let Some(uid) = &event.uid {
                ops.push(Op::Put {
                    cf: Cf::UserEvents,
                    key: layout::user_event(self.shard, uid, &log_key),
                    value: Vec::new(),
                });
            }
            let value = encode_stored(&event);
            ops.push(Op::Put {
                cf: Cf::Events,
                key: id_key,
                value: log_key.clone(),
            });
            ops.push(Op::Put {
                cf: Cf::Events,
                key: log_key,
                value,
            });
            accepted.push((seq, event));
        }
        if accepted.is_empty() && earlier.is_empty() {
            return Box::pin(ready(Ok(duplicates)));
        }
        let durable = (!accepted.is_empty()).then(|| {
            let (reply, durable) = oneshot::channel();
            self.pending.push(PendingIngest {
                events: accepted,
                ops,
                stored: stored_sender,
                reply,
            });
            if !self.commit_in_flight {
                self.flush(context);
            }
            durable
        });
        Box::pin(async move {
            // A copy is a duplicate only once the first is stored: answered sooner, a
            // consumer would move its offset past an event that a failed write then
            // loses.
            for first in earlier {
                first.await.map_err(|error| {
                    LiveStateError::Unavailable(format!(
                        "an earlier copy of an event of this batch could not be stored ({error}); retry"
                    ))
                })?;
            }
            if let Some(durable) = durable {
                durable
                    .await
                    .map_err(|_| LiveStateError::Unavailable("shard host stopped".into()))??;
            }
            Ok(duplicates)
        })
    }
}

impl Handler<RouteSessions> for ShardHost {
    type Result = ();

    fn handle(&mut self, RouteSessions(sessions, done): RouteSessions, _: &mut Context<Self>) {
        for (sid, events) in sessions {
            self.apply::<Session>(&sid, &events, &done);
        }
    }
}

impl Handler<AbsorbSession> for ShardHost {
    type Result = ();

    fn handle(&mut self, AbsorbSession(stitched): AbsorbSession, _: &mut Context<Self>) {
        self.absorb(stitched);
    }
}
