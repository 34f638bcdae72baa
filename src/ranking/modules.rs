//! Ranking modules (shelves, carousels) and the items inside them: where entries
//! pinned by `fixed_position` land among the ranked ones, and what a module scores.
//! Used twice per module request: for the modules of the response and for the items
//! of each module. Pure: knows nothing of HTTP or of what an entry is.
//!
//! PinnedOrder follows DESIGN.md §7 ("module fixed_position collisions"): pins are
//! applied in ascending position, ties in request order; a taken position goes to the
//! next free one; a position past the end goes to the end. A pin already placed is
//! never moved by a later one. Each pin that does not land where it asked is
//! reported as an [`Adjustment`], never refused.

/// Items whose scores make a module's item term (see [`module_score`]).
pub const MODULE_SCORE_TOP_ITEMS: usize = 3;

/// An entry the request pins at a 0-indexed position.
#[derive(Debug, Clone, PartialEq)]
pub struct Pinned<T> {
    pub entry: T,
    /// The requested 0-indexed position.
    pub position: usize,
}

/// Why a pinned entry did not land at its requested position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Displacement {
    /// A pin applied before it holds the position.
    Taken,
    /// The position is past the end of the list.
    OutOfRange,
}

/// A pinned entry placed somewhere else than it asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adjustment {
    /// Which pin: its index in the `pinned` argument of [`place`].
    pub pin: usize,
    pub requested: usize,
    /// Where it landed, an index into [`PinnedOrder::entries`].
    pub applied: usize,
    pub reason: Displacement,
}

/// The final order and the pins that moved.
#[derive(Debug, Clone, PartialEq)]
pub struct PinnedOrder<T> {
    /// Every ranked and pinned entry, in response order.
    pub entries: Vec<T>,
    /// In the order the pins were applied (ascending requested position, ties in
    /// request order; pins sent to the end last).
    pub adjustments: Vec<Adjustment>,
}

/// Places `pinned` entries at their positions in a list of `ranked.len() +
/// pinned.len()` entries; the ranked entries fill the free positions in their order.
///
/// A pin whose position is taken goes to the next free position after it. A pin
/// with no free position from its own to the end, or one asking for a position past
/// the end, goes to the end: after every ranked entry, in the order pins are applied.
pub fn place<T>(ranked: Vec<T>, pinned: Vec<Pinned<T>>) -> PinnedOrder<T> {
    let len = ranked.len() + pinned.len();
    let mut apply_order: Vec<usize> = (0..pinned.len()).collect();
    apply_order.sort_by_key(|&pin| pinned[pin].position); // stable: ties keep request order
                                                          // The pin occupying each position; `None` is free for a ranked entry.
    let mut slots: Vec<Option<usize>> = vec![None; len];
    let mut adjustments = Vec::new();
    let mut to_the_end = Vec::new();
    for pin in apply_order {
        let requested = pinned[pin].position;
        if requested >= len {
            to_the_end.push((pin, Displacement::OutOfRange));
            continue;
        }
        match (requested..len).find(|&slot| slots[slot].is_none()) {
            Some(slot) => {
                slots[slot] = Some(pin);
                if slot != requested {
                    adjustments.push(Adjustment {
                        pin,
                        requested,
                        applied: slot,
                        reason: Displacement::Taken,
                    });
                }
            }
            None => to_the_end.push((pin, Displacement::Taken)),
        }
    }
    // Free positions: the first ones take the ranked entries, the last ones the pins
    // sent to the end, so that those come after every ranked entry.
    let free: Vec<usize> = (0..len).filter(|&slot| slots[slot].is_none()).collect();
    debug_assert_eq!(free.len(), ranked.len() + to_the_end.len());
    for (&slot, (pin, reason)) in free[ranked.len()..].iter().zip(to_the_end) {
        slots[slot] = Some(pin);
        adjustments.push(Adjustment {
            pin,
            requested: pinned[pin].position,
            applied: slot,
            reason,
        });
    }
    let mut pinned: Vec<Option<T>> = pinned.into_iter().map(|pin| Some(pin.entry)).collect();
    let mut ranked = ranked.into_iter();
    let entries = slots
        .into_iter()
        .map(|slot| match slot {
            Some(pin) => pinned[pin].take().expect("each pin holds one position"),
            None => ranked.next().expect("each free position holds a ranked entry"),
        })
        .collect();
    PinnedOrder { entries, adjustments }
}

/// The score a module ranks by: the module model's score for the module plus the
/// mean of its best [`MODULE_SCORE_TOP_ITEMS`] item scores (0 for a module without
/// scored items). The item term lets a shelf of relevant items rise even under a
/// module model that knows nothing of it; capping it at the top few keeps a long
/// tail of weak items from drowning the strong ones a user sees first.
pub fn module_score(model_score: f32, item_scores: impl IntoIterator<Item = f32>) -> f32 {
    let mut item_scores: Vec<f32> = item_scores.into_iter().collect();
    item_scores.sort_by(|a, b| b.total_cmp(a));
    item_scores.truncate(MODULE_SCORE_TOP_ITEMS);
    if item_scores.is_empty() {
        return model_score;
    }
    model_score + item_scores.iter().sum::<f32>() / item_scores.len() as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin(entry: &'static str, position: usize) -> Pinned<&'static str> {
        Pinned { entry, position }
    }

    fn adjustment(pin: usize, requested: usize, applied: usize, reason: Displacement) -> Adjustment {
        Adjustment {
            pin,
            requested,
            applied,
            reason,
        }
    }

    #[test]
    fn without_pins_the_ranked_order_stays() {
        let placed = place(vec!["a", "b", "c"], Vec::new());
        assert_eq!(placed.entries, ["a", "b", "c"]);
        assert!(placed.adjustments.is_empty());
        assert!(place(Vec::<&str>::new(), Vec::new()).entries.is_empty());
    }

    #[test]
    fn pins_only_sit_at_their_positions() {
        let placed = place(Vec::new(), vec![pin("x", 2), pin("y", 0), pin("z", 1)]);
        assert_eq!(placed.entries, ["y", "z", "x"]);
        assert!(placed.adjustments.is_empty());
    }

    #[test]
    fn ranked_entries_fill_around_pins() {
        let placed = place(vec!["a", "b", "c"], vec![pin("x", 1), pin("y", 3)]);
        assert_eq!(placed.entries, ["a", "x", "b", "y", "c"]);
        assert!(placed.adjustments.is_empty());
    }

    #[test]
    fn a_taken_position_goes_to_the_next_free_one() {
        let placed = place(vec!["a", "b", "c"], vec![pin("x", 1), pin("y", 1), pin("z", 2)]);
        assert_eq!(placed.entries, ["a", "x", "y", "z", "b", "c"]);
        assert_eq!(
            placed.adjustments,
            [
                adjustment(1, 1, 2, Displacement::Taken),
                adjustment(2, 2, 3, Displacement::Taken)
            ]
        );
    }

    #[test]
    fn ties_go_in_request_order_and_positions_ascending() {
        let placed = place(vec!["a"], vec![pin("y", 0), pin("x", 0)]);
        assert_eq!(placed.entries, ["y", "x", "a"]);
        assert_eq!(placed.adjustments, [adjustment(1, 0, 1, Displacement::Taken)]);
        // The lower position is applied first whatever the request order.
        let placed = place(vec!["a"], vec![pin("late", 1), pin("early", 0), pin("tie", 1)]);
        assert_eq!(placed.entries, ["early", "late", "tie", "a"]);
        assert_eq!(placed.adjustments, [adjustment(2, 1, 2, Displacement::Taken)]);
    }

    #[test]
    fn a_position_past_the_end_goes_to_the_end() {
        let placed = place(vec!["a", "b"], vec![pin("x", 7)]);
        assert_eq!(placed.entries, ["a", "b", "x"]);
        assert_eq!(placed.adjustments, [adjustment(0, 7, 2, Displacement::OutOfRange)]);
        // Several go in ascending requested position, after every ranked entry.
        let placed = place(vec!["a"], vec![pin("far", 9), pin("x", 0), pin("near", 5)]);
        assert_eq!(placed.entries, ["x", "a", "near", "far"]);
        assert_eq!(
            placed.adjustments,
            [
                adjustment(2, 5, 2, Displacement::OutOfRange),
                adjustment(0, 9, 3, Displacement::OutOfRange)
            ]
        );
    }

    #[test]
    fn a_pin_with_no_free_position_after_its_own_goes_to_the_end() {
        // "x" holds position 2, the last; "y" finds nothing free from 2 on and takes
        // the last free position, after the ranked entries. "x" is not moved.
        let placed = place(vec!["a"], vec![pin("x", 2), pin("y", 2)]);
        assert_eq!(placed.entries, ["a", "y", "x"]);
        assert_eq!(placed.adjustments, [adjustment(1, 2, 1, Displacement::Taken)]);
    }

    #[test]
    fn module_score_adds_the_mean_of_the_top_items() {
        assert_eq!(module_score(0.5, []), 0.5);
        assert_eq!(module_score(0.5, [0.25]), 0.75);
        assert_eq!(module_score(1.0, [0.25, 1.0, 0.0, 0.5]), 1.0 + (1.0 + 0.5 + 0.25) / 3.0);
    }
}
