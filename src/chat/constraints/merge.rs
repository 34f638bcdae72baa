//! Merging one message into the constraints in force ([`Constraints::apply`], by the
//! rules tabled in the `constraints` module documentation), and the price
//! arithmetic "cheaper" and "more expensive" need.

use super::{
    Constraints, Extracted, LastAnswer, Note, PriceBand, PriceBound, PriceLimit, RelativePrice, Scale, Similar,
};

impl Constraints {
    /// Merges one message (see the table in the `constraints` module documentation):
    /// `last` is what the previous answer showed, `scale` the catalog's own prices and
    /// years for the words that name none.
    pub fn apply(&mut self, message: &Extracted, last: &LastAnswer, scale: &Scale) -> Vec<Note> {
        let mut notes = Vec::new();
        if message.reset {
            *self = Constraints::default();
        }
        if message.reference.is_some() && message.similar.is_none() && (!last.ids.is_empty() || message.ask.is_some()) {
            // A question about an item of the previous answer changes nothing.
            if last.ids.is_empty() {
                notes.push(Note::NothingShownYet);
            }
            return notes;
        }
        if message.clear_price {
            self.min_price = None;
            self.max_price = None;
        }
        match (message.price, message.band, message.relative) {
            (Some(bound), _, _) => self.set_bound(bound),
            (None, Some(band), _) => match scale.band(band) {
                Some(bound) => {
                    self.set_bound(bound);
                    notes.push(Note::Band(band));
                }
                None => notes.push(Note::NothingToCompare(match band {
                    PriceBand::Premium => RelativePrice::Pricier,
                    _ => RelativePrice::Cheaper,
                })),
            },
            (None, None, Some(relative)) => notes.push(self.apply_relative(relative, &last.prices, scale)),
            (None, None, None) => {}
        }
        if message.clear_groups {
            self.groups.clear();
            self.tags.clear();
            self.excluded_groups.clear();
            self.excluded_tags.clear();
        }
        exclude(&mut self.groups, &mut self.excluded_groups, &message.excluded_groups);
        exclude(&mut self.tags, &mut self.excluded_tags, &message.excluded_tags);
        merge_names(&mut self.groups, &message.groups, message.additive);
        merge_names(&mut self.tags, &message.tags, message.additive);
        self.excluded_groups.retain(|name| !message.groups.contains(name));
        self.excluded_tags.retain(|name| !message.tags.contains(name));
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
        if message.clear_years {
            self.years = None;
        }
        if let Some(years) = message.years.or_else(|| scale.years(message.year_word?)) {
            self.years = Some(years);
        }
        self.available |= message.available;
        if !message.terms.is_empty() {
            self.query = message.terms.clone();
            self.similar_to = None;
        }
        match &message.similar {
            Some(Similar::Item(id)) => self.like(id),
            Some(Similar::Reference(reference)) => match reference.resolve(last) {
                Some(id) => self.like(id),
                None => notes.push(Note::NothingShownYet),
            },
            Some(Similar::Title(words)) => {
                notes.push(Note::TitleNotFound(words.join(" ")));
                self.query = words.clone();
                self.similar_to = None;
            }
            None => {}
        }
        notes
    }

    /// Ranks by likeness to item `id` from now on, instead of any earlier search words.
    fn like(&mut self, id: &str) {
        self.similar_to = Some(id.to_owned());
        self.query.clear();
    }

    fn set_bound(&mut self, bound: PriceBound) {
        match bound {
            PriceBound::Ceiling(limit) => self.set_ceiling(limit),
            PriceBound::Floor(limit) => self.set_floor(limit),
            PriceBound::Range(low, high) => {
                self.min_price = Some(PriceLimit::inclusive(low.min(high)));
                self.max_price = Some(PriceLimit::inclusive(low.max(high)));
            }
        }
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

    /// "cheaper"/"pricier": against the previous answer's median price; without one,
    /// the catalog's "cheap"/"premium" band (or past the bound in force, if further);
    /// without prices in the catalog, a quarter past the bound in force.
    fn apply_relative(&mut self, relative: RelativePrice, last_prices: &[f64], scale: &Scale) -> Note {
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
        let past_ceiling = self.max_price.map(|ceiling| round_cents(ceiling.amount * 0.75));
        let past_floor = self.min_price.map(|floor| round_cents(floor.amount * 1.25));
        let band = match relative {
            RelativePrice::Cheaper => scale.band(PriceBand::Cheap),
            RelativePrice::Pricier => scale.band(PriceBand::Premium),
        };
        match (relative, band) {
            (RelativePrice::Cheaper, Some(PriceBound::Ceiling(limit))) => {
                match past_ceiling.filter(|amount| *amount < limit.amount) {
                    Some(amount) => self.set_ceiling(PriceLimit::exclusive(amount)),
                    None => self.set_ceiling(limit),
                }
                return Note::Band(PriceBand::Cheap);
            }
            (RelativePrice::Pricier, Some(PriceBound::Floor(limit))) => {
                self.max_price = None;
                match past_floor.filter(|amount| *amount > limit.amount) {
                    Some(amount) => self.set_floor(PriceLimit::exclusive(amount)),
                    None => self.set_floor(limit),
                }
                return Note::Band(PriceBand::Premium);
            }
            _ => {}
        }
        match (relative, past_ceiling, past_floor) {
            (RelativePrice::Cheaper, Some(amount), _) => {
                self.set_ceiling(PriceLimit::exclusive(amount));
                Note::RelativeToBound(relative)
            }
            (RelativePrice::Pricier, _, Some(amount)) => {
                self.max_price = None;
                self.set_floor(PriceLimit::exclusive(amount));
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
            || !self.excluded_groups.is_empty()
            || !self.excluded_tags.is_empty()
            || self.language.is_some()
            || self.audience.is_some()
            || self.years.is_some()
            || self.available
            || self.similar_to.is_some()
    }
}

/// Rules `ruled_out` names out: they leave `wanted` and join `excluded`.
fn exclude(wanted: &mut Vec<String>, excluded: &mut Vec<String>, ruled_out: &[String]) {
    for name in ruled_out {
        wanted.retain(|wanted| wanted != name);
        if !excluded.contains(name) {
            excluded.push(name.clone());
        }
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
