//! Outcome events: a click or a conversion that names, by its `rec_id` link, the
//! ranking it came from. The engine tells an [`OutcomeObserver`] of each new one once
//! it is applied (experiments attribute it to the arm the `rec_id` records).

use super::event::Event;

/// What kind of outcome an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An event of type `click`.
    Click,
    /// An event of type `conversion`.
    Conversion,
}

impl Outcome {
    /// The outcome an event is and the `rec_id` it carries; `None` for any other type
    /// or without a string `rec_id`.
    pub fn of(event: &Event) -> Option<(Outcome, &str)> {
        let outcome = match event.event_type.as_str() {
            "click" => Outcome::Click,
            "conversion" => Outcome::Conversion,
            _ => return None,
        };
        let rec_id = event.links.get("rec_id")?.as_str()?;
        Some((outcome, rec_id))
    }
}

/// Hears of every new (not duplicate) outcome event the node applies, exactly once
/// per event, on the node that owns the event's shard. Called on the ingest path:
/// it must return at once.
pub trait OutcomeObserver: Send + Sync {
    fn observe(&self, rec_id: &str, outcome: Outcome);
}
