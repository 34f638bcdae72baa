//! Constraints of a conversation, extracted from each message and carried across
//! turns.
//!
//! [`extract()`] reads one message against the catalog
//! [`LabelDictionary`](super::dictionary::LabelDictionary): price bounds
//! ("under 20", "between 10 and 20", "$10-$20", "at least 10"), relative price
//! ("cheaper", "more expensive"), group/category names and tags the catalog has
//! ("comedies" → Comedy), a language ("in French", "with an English guide"), an
//! audience ("for kids", "18+"), commands that clear ("any price", "any genre",
//! "start over"), and the remaining free-text terms.
//!
//! [`Constraints::apply`] merges one message into the constraints in force:
//!
//! | what the message says | effect |
//! |---|---|
//! | a price ceiling | replaces the ceiling; a floor at or above it is dropped |
//! | a price floor | replaces the floor; a ceiling at or below it is dropped |
//! | a price range | replaces both bounds |
//! | "cheaper" (no amount) | ceiling just below the median price of the previous answer (floor kept if below it); without a previous answer, 75% of the ceiling in force |
//! | "more expensive" (no amount) | floor just above the median price of the previous answer, ceiling lifted; without one, 125% of the floor in force |
//! | "any price" | clears both bounds |
//! | group/category names | replace the previous groups, or are added to them when the message says "also", "too", "as well", "plus", or starts with "and"/"or" ("comedies and thrillers" in one message names two groups and replaces) |
//! | tags | the same rule as groups, separately |
//! | "any genre" / "any category" | clears groups and tags |
//! | a language / "any language" | replaces / clears the language |
//! | an audience / "any age" | replaces / clears the audience |
//! | "start over" / "new search" / "reset" | clears everything first |
//! | free-text terms | replace the query; a message without any keeps the previous query, so "cheaper" re-runs the last search with a lower ceiling |
//!
//! Layout:
//! - this file: the constraint types, what one message says ([`Extracted`]) and
//!   what is in force ([`Constraints`]).
//! - `extract`: [`extract()`], one reading pass per kind of constraint.
//! - `reader`: a message's tokens and which of them a constraint has consumed;
//!   amounts ("$20", "15k").
//! - `words`: the word lists the extractor matches (phrases, units, languages).
//! - `merge`: [`Constraints::apply`], the table above, and the price arithmetic.

mod extract;
mod merge;
mod reader;
mod words;

use serde::{Deserialize, Serialize};

pub use extract::extract;
pub use merge::median;
pub use words::language_of;

/// A price limit; `inclusive` says whether the amount itself is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PriceLimit {
    pub amount: f64,
    pub inclusive: bool,
}

impl PriceLimit {
    fn inclusive(amount: f64) -> PriceLimit {
        PriceLimit {
            amount,
            inclusive: true,
        }
    }

    fn exclusive(amount: f64) -> PriceLimit {
        PriceLimit {
            amount,
            inclusive: false,
        }
    }
}

/// A price bound named with an amount.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PriceBound {
    Ceiling(PriceLimit),
    Floor(PriceLimit),
    /// Both ends inclusive.
    Range(f64, f64),
}

/// Price named relative to the previous answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RelativePrice {
    Cheaper,
    Pricier,
}

/// Who the items are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Audience {
    /// Suitable for children.
    Kids,
    /// For adults.
    Adults,
}

/// A language, by ISO 639-1 code and English name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Language {
    pub code: String,
    pub name: String,
}

/// What one message says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extracted {
    pub reset: bool,
    pub price: Option<PriceBound>,
    pub relative: Option<RelativePrice>,
    pub clear_price: bool,
    /// Group names as the catalog spells them.
    pub groups: Vec<String>,
    /// Tags as the catalog spells them.
    pub tags: Vec<String>,
    /// Named groups/tags are added to the previous ones instead of replacing them.
    pub additive: bool,
    pub clear_groups: bool,
    pub language: Option<Language>,
    pub clear_language: bool,
    pub audience: Option<Audience>,
    pub clear_audience: bool,
    /// Free-text terms: the words no constraint consumed, minus stopwords.
    pub terms: Vec<String>,
}

/// The constraints in force in a conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Constraints {
    pub min_price: Option<PriceLimit>,
    pub max_price: Option<PriceLimit>,
    /// Any of these groups (as the catalog spells them).
    pub groups: Vec<String>,
    /// Any of these tags.
    pub tags: Vec<String>,
    pub language: Option<Language>,
    pub audience: Option<Audience>,
    /// The free-text terms searched for.
    pub query: Vec<String>,
}

/// What applying a message did beyond the constraints themselves, for the reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// "cheaper"/"more expensive" was taken relative to this median of the previous answer.
    RelativeTo(RelativePrice, f64),
    /// "cheaper"/"more expensive" with no previous prices: the bound in force was moved by a quarter.
    RelativeToBound(RelativePrice),
    /// "cheaper"/"more expensive" with nothing to compare with: ignored.
    NothingToCompare(RelativePrice),
}

#[cfg(test)]
mod tests;

/// Constraints shared by the tests of the modules that read them.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    /// "comedies under 10": a price ceiling (exclusive) and one group.
    pub(crate) fn comedies_under_10() -> Constraints {
        Constraints {
            max_price: Some(PriceLimit {
                amount: 10.0,
                inclusive: false,
            }),
            groups: vec!["Comedy".into()],
            ..Constraints::default()
        }
    }
}
