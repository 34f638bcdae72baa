//! Merging one message into the constraints in force ([`Constraints::apply`], by the
//! rules tabled in the `constraints` module documentation), and the price
//! arithmetic "cheaper" and "more expensive" need.

use super::{Constraints, Extracted, Note, PriceBound, PriceLimit, RelativePrice};

impl Constraints {
    /// Merges one message (see the table in the `constraints` module documentation);
    /// `last_prices` are the prices of the items of the previous answer.
    pub fn apply(&mut self, message: &Extracted, last_prices: &[f64]) -> Vec<Note> {
        let mut notes = Vec::new();
        if message.reset {
            *self = Constraints::default();
        }
        if message.clear_price {
            self.min_price = None;
            self.max_price = None;
        }
        match message.price {
            Some(PriceBound::Ceiling(limit)) => self.set_ceiling(limit),
            Some(PriceBound::Floor(limit)) => self.set_floor(limit),
            Some(PriceBound::Range(low, high)) => {
                self.min_price = Some(PriceLimit::inclusive(low.min(high)));
                self.max_price = Some(PriceLimit::inclusive(low.max(high)));
            }
            None => {
                if let Some(relative) = message.relative {
                    notes.push(self.apply_relative(relative, last_prices));
                }
            }
        }
        if message.clear_groups {
            self.groups.clear();
            self.tags.clear();
        }
        merge_names(&mut self.groups, &message.groups, message.additive);
        merge_names(&mut self.tags, &message.tags, message.additive);
        if message.clear_language {
            self.language = None;
        }
        if let Some(language) = &message.language {
            self.language = Some(language.clone());
        }
        if message.clear_audience {
            self.audience = None;
        }
        if let Some(audience) = message.audience {
            self.audience = Some(audience);
        }
        if !message.terms.is_empty() {
            self.query = message.terms.clone();
        }
        notes
    }

    fn set_ceiling(&mut self, limit: PriceLimit) {
        if self.min_price.is_some_and(|floor| floor.amount >= limit.amount) {
            self.min_price = None;
        }
        self.max_price = Some(limit);
    }

    fn set_floor(&mut self, limit: PriceLimit) {
        if self.max_price.is_some_and(|ceiling| ceiling.amount <= limit.amount) {
            self.max_price = None;
        }
        self.min_price = Some(limit);
    }

    fn apply_relative(&mut self, relative: RelativePrice, last_prices: &[f64]) -> Note {
        if let Some(reference) = median(last_prices) {
            match relative {
                RelativePrice::Cheaper => self.set_ceiling(PriceLimit::exclusive(reference)),
                RelativePrice::Pricier => {
                    self.max_price = None;
                    self.set_floor(PriceLimit::exclusive(reference));
                }
            }
            return Note::RelativeTo(relative, reference);
        }
        match (relative, self.max_price, self.min_price) {
            (RelativePrice::Cheaper, Some(ceiling), _) => {
                self.set_ceiling(PriceLimit::exclusive(round_cents(ceiling.amount * 0.75)));
                Note::RelativeToBound(relative)
            }
            (RelativePrice::Pricier, _, Some(floor)) => {
                self.max_price = None;
                self.set_floor(PriceLimit::exclusive(round_cents(floor.amount * 1.25)));
                Note::RelativeToBound(relative)
            }
            _ => Note::NothingToCompare(relative),
        }
    }

    /// Whether a price satisfies the bounds.
    pub fn price_allows(&self, price: f64) -> bool {
        let above_floor = self.min_price.is_none_or(|floor| match floor.inclusive {
            true => price >= floor.amount,
            false => price > floor.amount,
        });
        let below_ceiling = self.max_price.is_none_or(|ceiling| match ceiling.inclusive {
            true => price <= ceiling.amount,
            false => price < ceiling.amount,
        });
        above_floor && below_ceiling
    }

    /// Whether any constraint besides the query is in force.
    pub fn is_filtering(&self) -> bool {
        self.min_price.is_some()
            || self.max_price.is_some()
            || !self.groups.is_empty()
            || !self.tags.is_empty()
            || self.language.is_some()
            || self.audience.is_some()
    }
}

fn merge_names(current: &mut Vec<String>, named: &[String], additive: bool) {
    if named.is_empty() {
        return;
    }
    if !additive {
        current.clear();
    }
    for name in named {
        if !current.contains(name) {
            current.push(name.clone());
        }
    }
}

/// The median of some prices; `None` for none.
pub fn median(prices: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = prices.iter().copied().filter(|p| p.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    Some(match sorted.len() % 2 {
        0 => round_cents((sorted[middle - 1] + sorted[middle]) / 2.0),
        _ => sorted[middle],
    })
}

fn round_cents(amount: f64) -> f64 {
    (amount * 100.0).round() / 100.0
}
