//! The domain types every layer shares, at the base of the crate: it imports no
//! layer above it (only the `timestamp` formats and `topology`'s shard ids).
//!
//! - [`event`]: the one internal [`event::Event`] both input formats decode into,
//!   and the [`event::SequencedEvent`] a shard's log hands on once it is durable.
//! - [`live_state`]: the live state of a session or user and its pure update and
//!   decay rules; the item attributes it keeps affinities to.
//! - [`signals`]: what ranking reads of a live state.
//! - [`recent`]: a live state's latest item interactions, packed, shared by the
//!   state and the signals it publishes.
//! - [`live_state_id`]: which live state a request is about (a session or a user).
//! - [`affinities`]: time-decayed affinities to item attributes, shared by a live
//!   state and the signals it publishes.
//! - [`attributes`]: affinity attributes (`group:…`) interned as small numbers.
//! - [`compact`]: small collections for the state of every live session and user.
//! - [`item_features`]: what ranking reads of a catalog item.
//! - [`session_claim`]: how a user's owner asks for a session another node started.
//! - [`outcome`]: clicks and conversions that name their ranking's `rec_id`, and who
//!   hears of them once they are applied.
//! - [`candidate`]: an item a ranking is asked about, and the explanation of a score.
//! - [`rules`]: the business rules a request or a model carries (what they are and
//!   how they are read; `ranking` applies them).
//! - [`catalog`]: a catalog table's record and the types of its custom fields.
//! - [`experiment`]: A/B experiments as defined, stored and reported.
//! - [`api_key`]: the scopes and records of API keys, and why a key is refused.
//! - [`backup`]: what a backup of the node's database is.

pub mod affinities;
pub mod api_key;
pub mod attributes;
pub mod backup;
pub mod candidate;
pub mod catalog;
pub mod compact;
pub mod event;
pub mod experiment;
pub mod item_features;
pub mod live_state;
pub mod live_state_id;
pub mod outcome;
pub mod recent;
pub mod rules;
pub mod session_claim;
pub mod signals;

pub use event::{Event, SequencedEvent};
pub use item_features::ItemFeatures;
pub use live_state_id::{LiveStateId, StateKind};
pub use signals::Signals;

/// A JSON integer >= 0. A whole number written as a float (`3.0`) counts: JSON
/// Schema calls it an integer, and so do clients generated from our OpenAPI document.
pub fn whole_number(value: &serde_json::Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        let float = value.as_f64()?;
        (float.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(&float)).then_some(float as u64)
    })
}
