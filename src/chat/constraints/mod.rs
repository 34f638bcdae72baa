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
//! | a price band ("cheap", "cheapest", "not too expensive", "premium") | a ceiling (floor) at a quantile of the catalog's prices ([`Scale`]); "cheaper"/"pricier" without an earlier priced answer read as "cheap"/"premium" |
//! | a ruled-out group or tag ("no horror", "without comedies") | added to the exclusions and removed from the wanted ones; naming it again wants it again |
//! | years ("from the 90s", "before 1980", "recent", "old") | replace the years |
//! | "in stock", "available" | only items that can be had, until "any availability" |
//! | "like the first one", "similar to Toy Story" | ranks by likeness to that item; a new free-text search or "start over" ends it |
//! | a reference or a question ("is it available?", "more") | nothing changes; the turn answers about the item, or pages on |
//!
//! Layout:
//! - this file: the constraint types, what one message says ([`Extracted`]) and
//!   what is in force ([`Constraints`]).
//! - `extract`: [`extract()`], one reading pass per kind of constraint.
//! - `reader`: a message's tokens and which of them a constraint has consumed;
//!   amounts ("$20", "15k").
//! - `words`: the word lists the extractor matches (phrases, units, languages).
//! - `merge`: [`Constraints::apply`], the table above, and the price arithmetic.
//! - `dialogue`, `years`: the passes for references, questions, likeness, paging,
//!   and years.
//! - [`structured`]: the same reading done by an LLM with structured output.

mod dialogue;
mod extract;
mod merge;
mod reader;
pub mod structured;
mod words;
mod years;

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
#[serde(rename_all = "lowercase")]
pub enum Audience {
    /// Suitable for children.
    #[serde(alias = "Kids")]
    Kids,
    /// For adults.
    #[serde(alias = "Adults")]
    Adults,
}

/// A language, by ISO 639-1 code and English name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Language {
    pub code: String,
    pub name: String,
}

/// Years an item's year must fall in (both ends inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct YearRange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<i32>,
}

impl YearRange {
    pub fn allows(&self, year: i32) -> bool {
        self.from.is_none_or(|from| year >= from) && self.to.is_none_or(|to| year <= to)
    }
}

/// A price word whose amount comes from the catalog's own prices (see [`Scale`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceBand {
    /// "cheap", "affordable": up to the lower quartile.
    Cheap,
    /// "cheapest": up to the lowest decile.
    Cheapest,
    /// "not too expensive", "reasonably priced": up to the median.
    Moderate,
    /// "premium", "expensive": from the upper quartile.
    Premium,
}

/// A year word whose years come from the catalog's own items (see [`Scale`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YearWord {
    /// "recent", "latest": the catalog's last five years.
    Recent,
    /// "old", "classic": up to the catalog's 20th percentile year.
    Old,
}

/// An item of the previous answer, named by position or pronoun.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// "the first one" (0), "the second" (1), ...
    Position(usize),
    /// "the last one".
    Last,
    /// "it", "that one": the item of a one-item answer, else its first.
    It,
}

impl Reference {
    /// The id this reference names in the previous answer.
    pub fn resolve(self, last: &LastAnswer) -> Option<&String> {
        match self {
            Reference::Position(position) => last.ids.get(position),
            Reference::Last => last.ids.last(),
            Reference::It => last.focus.as_ref().or(last.ids.first()),
        }
    }
}

/// What a message says the items should be like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Similar {
    /// An item of the previous answer.
    Reference(Reference),
    /// A title's words, to be found in the catalog.
    Title(Vec<String>),
    /// An item id (a title found in the catalog).
    Item(String),
}

/// A question about one item rather than a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// "is it available?", "in stock?"
    Availability,
    /// "how much is it?", "what does it cost?"
    Price,
}

/// What one message says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extracted {
    pub reset: bool,
    pub price: Option<PriceBound>,
    pub relative: Option<RelativePrice>,
    pub band: Option<PriceBand>,
    pub clear_price: bool,
    /// Group names as the catalog spells them.
    pub groups: Vec<String>,
    /// Tags as the catalog spells them.
    pub tags: Vec<String>,
    /// Groups and tags the message rules out ("no horror").
    pub excluded_groups: Vec<String>,
    pub excluded_tags: Vec<String>,
    /// Named groups/tags are added to the previous ones instead of replacing them.
    pub additive: bool,
    pub clear_groups: bool,
    pub language: Option<Language>,
    pub clear_language: bool,
    pub audience: Option<Audience>,
    pub clear_audience: bool,
    pub years: Option<YearRange>,
    pub year_word: Option<YearWord>,
    pub clear_years: bool,
    /// Only items that can be had now ("in stock", "available").
    pub available: bool,
    /// "like the first one", "similar to Toy Story".
    pub similar: Option<Similar>,
    /// An item of the previous answer the message is about.
    pub reference: Option<Reference>,
    /// A question about that item.
    pub ask: Option<Ask>,
    /// "more", "show me more": the next items, none shown before.
    pub more: bool,
    /// Free-text terms: the words no constraint consumed, minus stopwords.
    pub terms: Vec<String>,
    /// Words after a negator that no name matched ("no gore"): never searched for;
    /// read by meaning, they rule a group out.
    pub negated_terms: Vec<String>,
}

/// The constraints in force in a conversation (also the `constraints` of a chat answer).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Constraints {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_price: Option<PriceLimit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_price: Option<PriceLimit>,
    /// Any of these groups (as the catalog spells them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Any of these tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// None of these groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_groups: Vec<String>,
    /// None of these tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<Language>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Audience>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub years: Option<YearRange>,
    /// Only items that can be had now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub available: bool,
    /// Ranked by likeness to this item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similar_to: Option<String>,
    /// The free-text terms searched for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query: Vec<String>,
}

/// The catalog's own scale for words without amounts: price quantiles and years.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Scale {
    /// Prices at the 10th, 25th, 50th and 75th percentiles (`None`: no prices).
    pub prices: Option<[f64; 4]>,
    /// The newest year of the catalog and its 20th percentile year (`None`: no years).
    pub years: Option<(i32, i32)>,
}

impl Scale {
    /// The bound a band word stands for in this catalog.
    pub fn band(&self, band: PriceBand) -> Option<PriceBound> {
        let [p10, p25, p50, p75] = self.prices?;
        Some(match band {
            PriceBand::Cheapest => PriceBound::Ceiling(PriceLimit::inclusive(p10)),
            PriceBand::Cheap => PriceBound::Ceiling(PriceLimit::inclusive(p25)),
            PriceBand::Moderate => PriceBound::Ceiling(PriceLimit::inclusive(p50)),
            PriceBand::Premium => PriceBound::Floor(PriceLimit::inclusive(p75)),
        })
    }

    /// The years a year word stands for in this catalog.
    pub fn years(&self, word: YearWord) -> Option<YearRange> {
        let (newest, old) = self.years?;
        Some(match word {
            YearWord::Recent => YearRange {
                from: Some(newest - RECENT_YEARS),
                to: None,
            },
            YearWord::Old => YearRange {
                from: None,
                to: Some(old),
            },
        })
    }
}

/// "recent" reaches back this many years from the catalog's newest.
pub const RECENT_YEARS: i32 = 4;

/// What the previous answers showed: the latest list's item ids and their prices,
/// in order, and the item a later question was about ("it" names that one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LastAnswer {
    pub ids: Vec<String>,
    pub prices: Vec<f64>,
    pub focus: Option<String>,
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
    /// A price word read on the catalog's own prices ("cheap": up to its lower quartile).
    Band(PriceBand),
    /// "like <title>" named nothing in the catalog: its words were searched instead.
    TitleNotFound(String),
    /// The message pointed at an earlier answer ("the second one") but there was none.
    NothingShownYet,
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
