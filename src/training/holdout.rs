//! The sessions a rebuild holds out for the self-tuner: the most recent ones.
//!
//! A rebuild reads the log in event-time order. Sessions that begin within its
//! last tenth (at most [`WINDOW_EVENTS`] events, at most [`MAX_SESSIONS`] sessions)
//! are kept aside, not learned; every other event is. The tuner then predicts each
//! held-out click from the clicks before it in its session, with models that never
//! saw that session, as a deployment would predict the next session it meets
//! ([`crate::ranking::tuning`]). After the tuning the held-out events are learned
//! too, so the published models miss nothing.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::domain::event::Event;
use crate::domain::live_state::InteractionKind;
use crate::ranking::trained::session_key;
use crate::ranking::tuning::Case;
use crate::ranking::{ItemIndex, RecRecord, Trained};

/// The held-out window is at most this many events of the log's end...
const WINDOW_EVENTS: u64 = 20_000;
/// ...and at most a tenth of the log.
const WINDOW_SHARE: u64 = 10;
/// Sessions held out at most (later ones in the window are learned as usual).
const MAX_SESSIONS: usize = 5_000;
/// A case's prefix keeps at most this many visits, as a live session does
/// (co-visitation's `max_session_len`).
const MAX_PREFIX: usize = 50;
/// The most recent held-out clicks at most are predicted (each trial of the tuner
/// ranks every one).
const MAX_CASES: usize = 10_000;

/// Held-out sessions and their events, in log order.
pub struct Holdout {
    /// The position (in event-time order) from which new sessions are held out.
    from: u64,
    sessions: FxHashSet<u64>,
    events: Vec<(Event, Option<RecRecord>)>,
}

impl Holdout {
    /// For a log of about `events` events.
    pub fn new(events: u64) -> Holdout {
        let window = (events / WINDOW_SHARE).min(WINDOW_EVENTS);
        Holdout {
            from: events.saturating_sub(window),
            sessions: FxHashSet::default(),
            events: Vec::new(),
        }
    }

    /// Whether the event at `position` belongs to a held-out session: one already
    /// held out, or one that begins in the window (`trained` has not stored it).
    pub fn holds(&mut self, position: u64, trained: &Trained, event: &Event) -> bool {
        let Some(session) = session_key(event) else {
            return false;
        };
        if self.sessions.contains(&session) {
            return true;
        }
        let begins = position >= self.from && !trained.covisit.knows(session);
        if begins && self.sessions.len() < MAX_SESSIONS {
            self.sessions.insert(session);
            return true;
        }
        false
    }

    pub fn keep(&mut self, event: Event, shown: Option<RecRecord>) {
        self.events.push((event, shown));
    }

    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Every held-out click whose item `trained` knows and that follows another in
    /// its session (the [`MAX_CASES`] most recent): the session's earlier visits, what
    /// it had bought, the click.
    pub fn cases(&self, trained: &Trained) -> Vec<Case> {
        #[derive(Default)]
        struct Session {
            prefix: Vec<ItemIndex>,
            consumed: Vec<ItemIndex>,
        }
        let mut sessions: FxHashMap<u64, Session> = FxHashMap::default();
        let mut cases = Vec::new();
        for (event, _) in &self.events {
            let kind = InteractionKind::of(&event.event_type);
            let Some(key) = session_key(event).filter(|_| kind.is_visit()) else {
                continue;
            };
            let session = sessions.entry(key).or_default();
            for item in event.items().filter_map(|id| trained.items.get(id)) {
                if !session.prefix.is_empty() {
                    cases.push(Case {
                        session: key,
                        prefix: session.prefix.clone(),
                        consumed: session.consumed.clone(),
                        target: item,
                        at: event.event_time(),
                    });
                }
                session.prefix.push(item);
                if session.prefix.len() > MAX_PREFIX {
                    session.prefix.remove(0);
                }
                if kind == InteractionKind::Conversion && !session.consumed.contains(&item) {
                    session.consumed.push(item);
                }
            }
        }
        let older = cases.len().saturating_sub(MAX_CASES);
        cases.split_off(older)
    }

    /// The held-out events, to learn once the tuning is done.
    pub fn into_events(self) -> Vec<(Event, Option<RecRecord>)> {
        self.events
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::event::decode_v1;

    /// A click, or a purchase, `at` ms after a fixed time.
    fn event(kind: &str, sid: &str, item: &str, at: i64) -> Event {
        let at = 1_700_000_000_000 + at;
        let mut body = json!({"id": format!("{sid}-{at}"), "type": kind, "sid": sid,
                              "original_timestamp": crate::timestamp::format_rfc3339(at)});
        match kind {
            "click" => {
                body["click_type"] = json!("tap");
                body["item_id"] = json!(item);
            }
            _ => {
                body["conversion_type"] = json!("purchase");
                body["item_ids"] = json!([item]);
            }
        }
        decode_v1(body, at, || unreachable!("the id is given")).unwrap()
    }

    #[test]
    fn sessions_that_begin_in_the_last_tenth_are_held_out_whole() {
        let mut trained = Trained::new(86_400_000.0);
        let mut holdout = Holdout::new(20);
        let log = [
            event("click", "old", "A", 1),
            event("click", "old", "B", 2),
            event("click", "mid", "A", 3),
        ];
        for (position, event) in log.iter().enumerate() {
            assert!(!holdout.holds(position as u64, &trained, event));
            trained.learn_event(event, None, "");
        }
        // Position 18 of 20 is in the last tenth: "new" begins there, "old" began before.
        let late = [
            event("click", "new", "A", 4),
            event("click", "old", "C", 5),
            event("conversion", "new", "B", 6),
            event("click", "new", "B", 7),
            event("click", "new", "Z", 8),
            event("click", "new", "A", 9),
        ];
        let held: Vec<bool> = late
            .into_iter()
            .enumerate()
            .map(|(offset, event)| {
                let holds = holdout.holds(18 + offset as u64, &trained, &event);
                match holds {
                    true => holdout.keep(event, None),
                    false => trained.learn_event(&event, None, ""),
                }
                holds
            })
            .collect();
        assert_eq!(held, [true, false, true, true, true, true]);
        assert_eq!(holdout.sessions(), 1);

        let index = |id: &str| trained.items.get(id).unwrap();
        let cases = holdout.cases(&trained);
        let seen: Vec<(Vec<ItemIndex>, Vec<ItemIndex>, ItemIndex)> = cases
            .iter()
            .map(|case| (case.prefix.clone(), case.consumed.clone(), case.target))
            .collect();
        // Z was never learned: no case predicts it and no prefix holds it.
        let (a, b) = (index("A"), index("B"));
        assert_eq!(
            seen,
            [
                (vec![a], vec![], b),
                (vec![a, b], vec![b], b),
                (vec![a, b, b], vec![b], a)
            ]
        );
        assert_eq!(holdout.into_events().len(), 5);
    }
}
