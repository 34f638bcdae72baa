//! Live state of a session or a user (DESIGN.md §3), as plain data with pure
//! update rules: the last item interactions, time-decayed affinities to item
//! attributes, recent queries, purchases. Actors own it; tests drive it directly.

use std::collections::BTreeMap;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use thin_vec::ThinVec;

use super::affinities::Affinities;
use super::attributes::intern;
use super::compact::{AppliedSeqs, NewestStrings};
use super::event::Event;
use super::recent::{Interaction, RecentItems};
use crate::timestamp::format_rfc3339;
use crate::topology::ShardId;

/// Ids of the newest applied events kept for tracing.
const KEPT_EVENT_IDS: usize = 100;
/// Queries, purchases and sessions kept.
const KEPT_LIST: usize = 50;
/// Affinities below this are dropped.
pub(super) const AFFINITY_FLOOR: f64 = 1e-4;

/// How a kind of state forgets.
#[derive(Debug, Clone, Copy)]
pub struct DecayParams {
    /// Time for an affinity to halve.
    pub half_life_ms: f64,
    /// Item interactions kept.
    pub recent_items: usize,
}

/// A score that halves every half-life, stored with the time it was last brought up to.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Decayed {
    pub value: f64,
    pub at: i64,
}

impl Decayed {
    /// The value as of `now`.
    pub fn at_time(&self, now: i64, half_life_ms: f64) -> f64 {
        self.value * decay(now - self.at, half_life_ms)
    }

    /// Adds `weight` observed at `at` (events may arrive out of order).
    pub fn add(&mut self, weight: f64, at: i64, half_life_ms: f64) {
        if at >= self.at {
            self.value = self.value * decay(at - self.at, half_life_ms) + weight;
            self.at = at;
        } else {
            self.value += weight * decay(self.at - at, half_life_ms);
        }
    }
}

fn decay(elapsed_ms: i64, half_life_ms: f64) -> f64 {
    0.5f64.powf(elapsed_ms.max(0) as f64 / half_life_ms)
}

/// What an event type means for live state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InteractionKind {
    View,
    Click,
    Cart,
    Conversion,
    Dwell,
    /// Shown, not chosen: no affinity, not an interaction.
    Impression,
    Search,
    Other,
}

/// The standard and common engagement type names and what each means; any other
/// name is [`InteractionKind::Other`]. (Live states also store these names as their
/// place in this list: a byte instead of the name.)
pub const KNOWN_EVENT_TYPES: [(&str, InteractionKind); 17] = [
    ("page_view", InteractionKind::View),
    ("view", InteractionKind::View),
    ("product_view", InteractionKind::View),
    ("item_view", InteractionKind::View),
    ("detail_view", InteractionKind::View),
    ("click", InteractionKind::Click),
    ("add_to_cart", InteractionKind::Cart),
    ("cart", InteractionKind::Cart),
    ("add_to_wishlist", InteractionKind::Cart),
    ("conversion", InteractionKind::Conversion),
    ("purchase", InteractionKind::Conversion),
    ("order", InteractionKind::Conversion),
    ("booking", InteractionKind::Conversion),
    ("dwell_time", InteractionKind::Dwell),
    ("impression", InteractionKind::Impression),
    ("module_view", InteractionKind::Impression),
    ("search", InteractionKind::Search),
];

impl InteractionKind {
    /// What `event_type` means ([`KNOWN_EVENT_TYPES`]).
    pub fn of(event_type: &str) -> InteractionKind {
        KNOWN_EVENT_TYPES
            .iter()
            .find(|(name, _)| *name == event_type)
            .map_or(InteractionKind::Other, |(_, kind)| *kind)
    }

    /// Whether it visits its items: what co-visitation learns sessions from.
    pub fn is_visit(self) -> bool {
        matches!(
            self,
            InteractionKind::View | InteractionKind::Click | InteractionKind::Cart | InteractionKind::Conversion
        )
    }

    /// Affinity weight of one such event.
    pub fn weight(self, dwell_ms: Option<f64>) -> f64 {
        match self {
            InteractionKind::View | InteractionKind::Other => 1.0,
            InteractionKind::Click => 2.0,
            InteractionKind::Cart => 3.0,
            InteractionKind::Conversion => 5.0,
            InteractionKind::Dwell => 1.0 + (dwell_ms.unwrap_or(0.0) / 30_000.0).min(3.0),
            InteractionKind::Impression | InteractionKind::Search => 0.0,
        }
    }
}

/// The affinity keys an item contributes: its groups, tags, promo tags, guide
/// languages, age range, price band and availability.
pub fn affinity_attributes(item: &Map<String, Value>) -> Vec<String> {
    let mut keys = Vec::new();
    for (field, prefix) in [
        ("groups", "group"),
        ("group", "group"),
        ("category", "group"),
        ("tags", "tag"),
        ("promo_tags", "tag"),
        ("language", "lang"),
        ("languages", "lang"),
        ("attraction_live_guide_languages", "lang"),
        ("age_range", "age"),
        ("attraction_age_range", "age"),
    ] {
        match item.get(field) {
            Some(Value::String(value)) => keys.push(format!("{prefix}:{value}")),
            Some(Value::Array(values)) => keys.extend(
                values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|value| format!("{prefix}:{value}")),
            ),
            _ => {}
        }
    }
    if let Some(price) = item.get("price").and_then(Value::as_f64).filter(|p| *p >= 0.0) {
        keys.push(format!("price_band:{}", (price + 1.0).log2().floor() as i64));
    }
    if let Some(available) = availability(item) {
        keys.push(format!("available:{available}"));
    }
    keys
}

/// The fields that say whether an item can be had, the first present deciding:
/// `availability` (the SPEC's), then the names shops also use.
const AVAILABILITY_FIELDS: [&str; 4] = ["availability", "available", "in_stock", "stock"];

/// Whether the catalog says an item can be had: the first of [`AVAILABILITY_FIELDS`]
/// present, as a boolean, a count, or a word ("available", "in_stock", "sold_out",
/// ...); a soft-deleted item cannot. `None` when the item does not say.
pub fn availability(item: &Map<String, Value>) -> Option<bool> {
    if item.get("is_deleted") == Some(&Value::Bool(true)) {
        return Some(false);
    }
    match AVAILABILITY_FIELDS.iter().find_map(|field| item.get(*field))? {
        Value::Bool(available) => Some(*available),
        Value::Number(count) => count.as_f64().map(|count| count > 0.0),
        Value::String(word) => match word.to_ascii_lowercase().replace([' ', '-'], "_").as_str() {
            "available" | "in_stock" | "instock" | "yes" | "true" | "open" | "bookable" | "limited" => Some(true),
            "unavailable" | "sold_out" | "out_of_stock" | "outofstock" | "no" | "false" | "closed" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// The live state of one session or user.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveState {
    /// Session: the user it was stitched to.
    pub uid: Option<String>,
    /// User: the sessions seen with this uid, newest first.
    pub sessions: ThinVec<String>,
    /// Shared with the signals last published.
    pub recent: RecentItems,
    /// Shared with the signals last published.
    pub affinities: Affinities,
    /// Newest first.
    pub queries: ThinVec<String>,
    /// Items bought, newest first.
    pub purchased: ThinVec<CompactString>,
    pub event_count: u64,
    pub last_event_at: Option<i64>,
    /// Newest first.
    pub event_ids: NewestStrings,
    /// Per source shard, the highest log sequence applied: replays skip what is at or below it.
    pub applied: AppliedSeqs,
    /// User: sessions whose anonymous signals were absorbed (absorbing is done once).
    #[serde(default)]
    pub absorbed: ThinVec<String>,
}

fn push_front_bounded<T: PartialEq>(list: &mut ThinVec<T>, value: T, limit: usize, unique: bool) {
    if unique {
        list.retain(|existing| *existing != value);
    }
    // One more and no more: a state's lists grow an entry at a time up to their
    // limit, and doubling would leave most of them a third empty (hundreds of
    // thousands of states are live at once).
    if list.len() == list.capacity() {
        list.reserve_exact(1);
    }
    list.insert(0, value);
    list.truncate(limit);
}

impl LiveState {
    /// Whether the event at `seq` of `source`'s log was applied already.
    pub fn has_applied(&self, source: ShardId, seq: u64) -> bool {
        self.applied.get(source).is_some_and(|applied| seq <= applied)
    }

    /// Applies one event. `attributes` are the affinity keys of its items.
    pub fn apply(&mut self, source: ShardId, seq: u64, event: &Event, attributes: &[String], params: DecayParams) {
        self.applied.insert(source, seq);
        let kind = InteractionKind::of(&event.event_type);
        let at = event.event_time();
        if kind != InteractionKind::Impression {
            for item_id in event.items() {
                let interaction = Interaction {
                    item_id,
                    event_type: &event.event_type,
                    at,
                    dwell_ms: event.dwell_ms,
                };
                self.recent.insert_by_time(interaction, params.recent_items);
            }
        }
        let weight = kind.weight(event.dwell_ms);
        if weight > 0.0 {
            for key in attributes {
                self.affinities.add(intern(key), weight, at, params.half_life_ms);
            }
        }
        if let Some(query) = &event.query {
            push_front_bounded(&mut self.queries, query.clone(), KEPT_LIST, true);
        }
        if kind == InteractionKind::Conversion {
            for item_id in event.items() {
                push_front_bounded(&mut self.purchased, item_id.into(), KEPT_LIST, true);
            }
        }
        self.event_count += 1;
        self.last_event_at = Some(self.last_event_at.map_or(at, |last| last.max(at)));
        self.event_ids.push(&event.id, KEPT_EVENT_IDS);
    }

    /// Takes in another state's signals (an anonymous session joining its user).
    pub fn absorb(&mut self, other: &LiveState, params: DecayParams) {
        let mut merged: Vec<Interaction> = self.recent.iter().chain(other.recent.iter()).collect();
        merged.sort_by_key(|interaction| std::cmp::Reverse(interaction.at));
        self.recent = RecentItems::from_newest_first(merged.into_iter().take(params.recent_items));
        for theirs in other.affinities.iter() {
            let Decayed { value, at } = theirs.decayed();
            self.affinities.add(theirs.id, value, at, params.half_life_ms);
        }
        for query in other.queries.iter().rev() {
            push_front_bounded(&mut self.queries, query.clone(), KEPT_LIST, true);
        }
        for item in other.purchased.iter().rev() {
            push_front_bounded(&mut self.purchased, item.clone(), KEPT_LIST, true);
        }
        self.event_count += other.event_count;
        self.last_event_at = self.last_event_at.max(other.last_event_at);
        let ids: Vec<_> = other.event_ids.iter().collect();
        for id in ids.iter().rev() {
            self.event_ids.push(id, KEPT_EVENT_IDS);
        }
    }

    /// Notes a session of this user.
    pub fn add_session(&mut self, sid: &str) {
        push_front_bounded(&mut self.sessions, sid.to_owned(), KEPT_LIST, true);
    }

    /// Affinities decayed to `now`, dropping the negligible ones.
    pub fn affinities_at(&self, now: i64, half_life_ms: f64) -> BTreeMap<String, f64> {
        self.affinities
            .iter()
            .map(|affinity| {
                (
                    affinity.attribute().to_owned(),
                    affinity.decayed().at_time(now, half_life_ms),
                )
            })
            .filter(|(_, value)| *value > AFFINITY_FLOOR)
            .collect()
    }

    /// The fields every snapshot shares.
    pub fn snapshot(&self, now: i64, params: DecayParams, live: bool) -> Map<String, Value> {
        let recent: Vec<Value> = self
            .recent
            .iter()
            .map(|i| json!({"item_id": i.item_id, "type": i.event_type, "at": format_rfc3339(i.at), "dwell_ms": i.dwell_ms}))
            .collect();
        let snapshot = json!({
            "live": live,
            "event_count": self.event_count,
            "last_event_at": self.last_event_at.map(format_rfc3339),
            "recent": recent,
            "affinities": self.affinities_at(now, params.half_life_ms),
            "queries": self.queries,
            "event_ids": self.event_ids,
        });
        match snapshot {
            Value::Object(map) => map,
            _ => unreachable!("json! of an object literal"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PARAMS: DecayParams = DecayParams {
        half_life_ms: 1000.0,
        recent_items: 3,
    };

    fn event(id: &str, event_type: &str, item: &str, at: i64) -> Event {
        serde_json::from_value(
            json!({"id": id, "type": event_type, "original_timestamp": at, "ingest_timestamp": at,
                                      "sid": "s", "item_id": item}),
        )
        .unwrap()
    }

    #[test]
    fn availability_is_read_from_the_fields_shops_use() {
        let said = |row: Value| availability(row.as_object().unwrap());
        assert_eq!(said(json!({"availability": "sold out"})), Some(false));
        assert_eq!(said(json!({"availability": 3})), Some(true));
        assert_eq!(said(json!({"available": false})), Some(false));
        assert_eq!(said(json!({"in_stock": false})), Some(false));
        assert_eq!(said(json!({"in_stock": "yes"})), Some(true));
        assert_eq!(said(json!({"stock": 0})), Some(false));
        assert_eq!(said(json!({"stock": 12})), Some(true));
        // The SPEC's field decides over the others; a deleted item is never available.
        assert_eq!(said(json!({"availability": true, "stock": 0})), Some(true));
        assert_eq!(said(json!({"stock": 5, "is_deleted": true})), Some(false));
        assert_eq!(said(json!({"name": "mug"})), None);
    }

    #[test]
    fn affinities_weight_and_decay() {
        let mut state = LiveState::default();
        let shoes = vec!["group:shoes".to_owned()];
        state.apply(0, 1, &event("e1", "click", "i1", 0), &shoes, PARAMS);
        state.apply(0, 2, &event("e2", "purchase", "i1", 1000), &shoes, PARAMS);
        // 2 halved once, plus 5.
        assert!((state.affinities_at(1000, 1000.0)["group:shoes"] - 6.0).abs() < 1e-9);
        assert!((state.affinities_at(2000, 1000.0)["group:shoes"] - 3.0).abs() < 1e-9);
        assert_eq!(state.purchased, ["i1"]);
        assert!(state.has_applied(0, 2) && !state.has_applied(0, 3) && !state.has_applied(1, 1));
    }

    #[test]
    fn recent_is_newest_first_and_bounded_impressions_excluded() {
        let mut state = LiveState::default();
        for (seq, item) in ["a", "b", "c", "d"].iter().enumerate() {
            state.apply(0, seq as u64 + 1, &event(item, "view", item, seq as i64), &[], PARAMS);
        }
        state.apply(0, 9, &event("imp", "impression", "z", 9), &[], PARAMS);
        let items: Vec<_> = state.recent.iter().map(|i| i.item_id).collect();
        assert_eq!(items, ["d", "c", "b"]);
        assert_eq!(state.event_count, 5);
        assert_eq!(state.event_ids.front().as_deref(), Some("imp"));
    }

    #[test]
    fn absorb_keeps_the_other_sessions_signals() {
        let mut anonymous = LiveState::default();
        anonymous.apply(3, 1, &event("e1", "click", "i1", 10), &["tag:red".to_owned()], PARAMS);
        let mut user = LiveState::default();
        user.apply(5, 1, &event("e2", "view", "i2", 20), &[], PARAMS);
        user.absorb(&anonymous, PARAMS);
        assert_eq!(user.event_count, 2);
        assert_eq!(user.recent.iter().map(|i| i.item_id).collect::<Vec<_>>(), ["i2", "i1"]);
        assert!(user.affinities.get("tag:red").is_some());
    }

    #[test]
    fn snapshots_round_trip_through_the_stored_encoding() {
        let mut state = LiveState::default();
        state.apply(
            2,
            7,
            &event("e1", "purchase", "i1", 10),
            &["group:a".to_owned()],
            PARAMS,
        );
        state.add_session("s9");
        state.absorbed.push("s8".into());
        let stored = postcard::to_allocvec(&state).unwrap();
        assert_eq!(postcard::from_bytes::<LiveState>(&stored).unwrap(), state);
    }

    /// The budget behind a live user's kilobyte: a state with ten events on ten items
    /// (15 attributes) and the signals it publishes, inline and on the heap. The
    /// shard host's entry and the board's come on top.
    #[test]
    fn a_state_with_ten_events_and_its_signals_take_under_a_kilobyte() {
        use crate::allocator::counting::held_by_this_thread;
        use crate::domain::signals::Signals;

        let params = DecayParams {
            half_life_ms: 1000.0,
            recent_items: 50,
        };
        let attributes = |n: usize| [format!("group:g-{n}"), format!("price_band:{}", n % 5)];
        (0..10).flat_map(attributes).for_each(|key| {
            intern(&key);
        });
        let events: Vec<Event> = (0..10)
            .map(|n| {
                let id = uuid::Uuid::new_v4().to_string();
                event(&id, ["view", "click"][n % 2], &format!("item-{n:05}"), n as i64)
            })
            .collect();
        let before = held_by_this_thread();
        let mut state = LiveState::default();
        for (n, event) in events.iter().enumerate() {
            state.apply(0, n as u64 + 1, event, &attributes(n), params);
        }
        let heap = held_by_this_thread() - before;
        let published = std::sync::Arc::new(Signals::of(&state, params.half_life_ms));
        let signals = held_by_this_thread() - before - heap;
        let inline = std::mem::size_of::<LiveState>() as isize;
        assert_eq!((state.recent.len(), state.affinities.len()), (10, 15));
        assert!(
            inline + heap + signals <= 1024,
            "state {inline} inline + {heap} on the heap, signals {signals}"
        );
        drop(published);
    }

    #[test]
    fn item_attributes_become_affinity_keys() {
        let item = json!({"groups": ["Boat Tours"], "tags": ["sea", "family"], "price": 25.5});
        let keys = affinity_attributes(item.as_object().unwrap());
        assert_eq!(keys, ["group:Boat Tours", "tag:sea", "tag:family", "price_band:4"]);
    }
}
