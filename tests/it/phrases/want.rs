//! What a turn must have understood. A case writes a [`Want`] with the builders
//! below (only the keys it names are checked); the runner resolves it against the
//! catalog and the previous answer into an [`Expected`], which is compared with the
//! answer's `constraints` and which every returned item must satisfy.

use serde_json::Value;

use super::catalog::{Catalog, Item};

/// Every key of an answer's `constraints` (chat18.md).
pub const KEYS: [&str; 11] = [
    "query",
    "groups",
    "tags",
    "excluded_groups",
    "excluded_tags",
    "min_price",
    "max_price",
    "language",
    "audience",
    "years",
    "similar_to",
];

/// Largest difference between an expected and an answered amount.
const AMOUNT_TOLERANCE: f64 = 0.005 + 1e-9;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Audience {
    Kids,
    Adults,
}

impl Audience {
    fn as_str(self) -> &'static str {
        match self {
            Audience::Kids => "kids",
            Audience::Adults => "adults",
        }
    }
}

/// An amount as a case names it.
#[derive(Debug, Clone, Copy)]
pub enum Amount {
    Exactly(f64),
    /// q(p) of the catalog's prices.
    Quantile(f64),
    /// The median price of the previous answer's items.
    PreviousMedian,
}

#[derive(Debug, Clone, Copy)]
pub struct Bound {
    amount: Amount,
    inclusive: bool,
}

/// A year as a case names it.
#[derive(Debug, Clone, Copy)]
pub enum Year {
    Exactly(i32),
    /// Y(p) of the catalog's years ("old").
    Quantile(f64),
    /// The catalog's largest year minus 4 ("recent").
    Recent,
}

/// A position in the previous answer.
#[derive(Debug, Clone, Copy)]
pub enum Position {
    Nth(usize),
    Last,
}

pub const FIRST: Position = Position::Nth(0);
pub const SECOND: Position = Position::Nth(1);
pub const THIRD: Position = Position::Nth(2);
pub const LAST: Position = Position::Last;

impl std::fmt::Display for Position {
    fn fmt(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Position::Nth(index) => write!(formatter, "position {}", index + 1),
            Position::Last => write!(formatter, "the last position"),
        }
    }
}

impl Position {
    pub fn pick(self, items: &[String]) -> Option<&String> {
        match self {
            Position::Nth(index) => items.get(index),
            Position::Last => items.last(),
        }
    }
}

/// The item a turn asks to be "like".
#[derive(Debug, Clone, Copy)]
pub enum Like {
    /// A title resolved in the catalog.
    Title(&'static str),
    /// An item of the previous answer.
    Shown(Position),
}

/// The constraints a case expects after a turn; `None` fields are not checked.
#[derive(Debug, Clone, Default)]
pub struct Want {
    /// Start from what the previous turn expected (constraints merge across turns).
    inherit: bool,
    /// The answer's constraints equal the previous answer's (references, questions, paging).
    pub unchanged: bool,
    /// Free-text terms; empty means the key is absent.
    query: Option<Vec<&'static str>>,
    groups: Option<Vec<&'static str>>,
    excluded_groups: Option<Vec<&'static str>>,
    tags: Option<Vec<&'static str>>,
    excluded_tags: Option<Vec<&'static str>>,
    min_price: Option<Bound>,
    max_price: Option<Bound>,
    /// A language code.
    language: Option<&'static str>,
    audience: Option<Audience>,
    years: Option<(Option<Year>, Option<Year>)>,
    similar_to: Option<Like>,
    /// Keys that must be absent from the answer.
    absent: Vec<&'static str>,
}

/// A fresh expectation: only what the builders name.
pub fn want() -> Want {
    Want::default()
}

/// What the previous turn expected, changed by the builders.
pub fn previous() -> Want {
    Want {
        inherit: true,
        ..Want::default()
    }
}

/// Nothing changes: the constraints of the previous answer, exactly.
pub fn same() -> Want {
    Want {
        inherit: true,
        unchanged: true,
        ..Want::default()
    }
}

impl Want {
    pub fn groups(mut self, groups: &[&'static str]) -> Want {
        self.groups = Some(groups.to_vec());
        self
    }

    /// Excluded groups.
    pub fn not(mut self, groups: &[&'static str]) -> Want {
        self.excluded_groups = Some(groups.to_vec());
        self
    }

    pub fn tags(mut self, tags: &[&'static str]) -> Want {
        self.tags = Some(tags.to_vec());
        self
    }

    pub fn not_tags(mut self, tags: &[&'static str]) -> Want {
        self.excluded_tags = Some(tags.to_vec());
        self
    }

    pub fn query(mut self, terms: &[&'static str]) -> Want {
        self.query = Some(terms.to_vec());
        self
    }

    /// No free-text terms (`query` omitted).
    pub fn no_query(self) -> Want {
        self.query(&[])
    }

    fn max(mut self, amount: Amount, inclusive: bool) -> Want {
        self.max_price = Some(Bound { amount, inclusive });
        self
    }

    fn min(mut self, amount: Amount, inclusive: bool) -> Want {
        self.min_price = Some(Bound { amount, inclusive });
        self
    }

    pub fn under(self, amount: f64) -> Want {
        self.max(Amount::Exactly(amount), false)
    }

    pub fn at_most(self, amount: f64) -> Want {
        self.max(Amount::Exactly(amount), true)
    }

    pub fn over(self, amount: f64) -> Want {
        self.min(Amount::Exactly(amount), false)
    }

    pub fn at_least(self, amount: f64) -> Want {
        self.min(Amount::Exactly(amount), true)
    }

    pub fn between(self, low: f64, high: f64) -> Want {
        self.at_least(low).at_most(high)
    }

    /// "cheap", "affordable", ...: at most q(0.25).
    pub fn cheap(self) -> Want {
        self.max(Amount::Quantile(0.25), true)
    }

    pub fn cheapest(self) -> Want {
        self.max(Amount::Quantile(0.10), true)
    }

    /// "not too expensive", "mid-range", ...: at most q(0.50).
    pub fn mid_priced(self) -> Want {
        self.max(Amount::Quantile(0.50), true)
    }

    /// "premium", "expensive", ...: at least q(0.75).
    pub fn premium(self) -> Want {
        self.min(Amount::Quantile(0.75), true)
    }

    /// "cheaper" after a priced answer: under its median.
    pub fn cheaper(self) -> Want {
        self.max(Amount::PreviousMedian, false)
    }

    /// "pricier" after a priced answer: over its median, no ceiling.
    pub fn pricier(self) -> Want {
        self.min(Amount::PreviousMedian, false).absent(&["max_price"])
    }

    pub fn kids(mut self) -> Want {
        self.audience = Some(Audience::Kids);
        self
    }

    pub fn adults(mut self) -> Want {
        self.audience = Some(Audience::Adults);
        self
    }

    pub fn language(mut self, code: &'static str) -> Want {
        self.language = Some(code);
        self
    }

    pub fn years(mut self, from: i32, to: i32) -> Want {
        self.years = Some((Some(Year::Exactly(from)), Some(Year::Exactly(to))));
        self
    }

    pub fn until(mut self, to: i32) -> Want {
        self.years = Some((None, Some(Year::Exactly(to))));
        self
    }

    pub fn since(mut self, from: i32) -> Want {
        self.years = Some((Some(Year::Exactly(from)), None));
        self
    }

    /// "old", "classic": up to Y(0.2).
    pub fn old(mut self) -> Want {
        self.years = Some((None, Some(Year::Quantile(0.2))));
        self
    }

    /// "recent", "newest": from the largest year minus 4.
    pub fn recent(mut self) -> Want {
        self.years = Some((Some(Year::Recent), None));
        self
    }

    /// Ranked like the item with this exact catalog title.
    pub fn like(mut self, title: &'static str) -> Want {
        self.similar_to = Some(Like::Title(title));
        self
    }

    /// Ranked like an item of the previous answer.
    pub fn like_shown(mut self, position: Position) -> Want {
        self.similar_to = Some(Like::Shown(position));
        self
    }

    pub fn absent(mut self, keys: &[&'static str]) -> Want {
        self.absent.extend_from_slice(keys);
        self
    }

    /// No constraint at all: every key absent.
    pub fn no_constraints(self) -> Want {
        self.absent(&KEYS)
    }
}

/// The previous turn, as resolution needs it.
pub struct Before<'a> {
    pub expected: &'a Expected,
    /// Item ids of the previous answer.
    pub items: &'a [String],
}

/// A price limit with its amount known.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    pub amount: f64,
    pub inclusive: bool,
}

/// A [`Want`] resolved against the catalog and the previous answer.
#[derive(Debug, Clone, Default)]
pub struct Expected {
    pub query: Option<Vec<String>>,
    pub groups: Option<Vec<String>>,
    pub excluded_groups: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    pub excluded_tags: Option<Vec<String>>,
    pub min_price: Option<Limit>,
    pub max_price: Option<Limit>,
    pub language: Option<String>,
    pub audience: Option<Audience>,
    pub years: Option<(Option<i32>, Option<i32>)>,
    pub similar_to: Option<String>,
    pub absent: Vec<&'static str>,
}

fn owned(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| word.to_string()).collect()
}

impl Want {
    /// The expectation with every amount, year and reference made concrete.
    pub fn resolve(&self, catalog: &Catalog, before: Option<&Before>) -> Result<Expected, String> {
        let mut expected = match (self.inherit, before) {
            (true, Some(before)) => Expected {
                absent: Vec::new(),
                ..before.expected.clone()
            },
            (true, None) => {
                return Err("case error: the case continues a conversation that has no previous turn".into())
            }
            (false, _) => Expected::default(),
        };
        let previous_median = || -> Result<f64, String> {
            let before = before.ok_or("case error: \"cheaper\"/\"pricier\" expected without a previous answer")?;
            let prices: Vec<f64> = before
                .items
                .iter()
                .filter_map(|id| catalog.get(id).map(|item| item.price))
                .collect();
            median(&prices).ok_or_else(|| "nothing to compare with: the previous answer had no priced items".to_owned())
        };
        let limit = |bound: Bound| -> Result<Limit, String> {
            let amount = match bound.amount {
                Amount::Exactly(amount) => amount,
                Amount::Quantile(p) => catalog.price_quantile(p),
                Amount::PreviousMedian => previous_median()?,
            };
            Ok(Limit {
                amount,
                inclusive: bound.inclusive,
            })
        };
        let year = |year: Year| match year {
            Year::Exactly(year) => year,
            Year::Quantile(p) => catalog.year_quantile(p),
            Year::Recent => catalog.latest_year() - 4,
        };

        if let Some(query) = &self.query {
            expected.query = Some(owned(query));
        }
        for (wanted, slot) in [
            (&self.groups, &mut expected.groups),
            (&self.excluded_groups, &mut expected.excluded_groups),
            (&self.tags, &mut expected.tags),
            (&self.excluded_tags, &mut expected.excluded_tags),
        ] {
            if let Some(words) = wanted {
                *slot = Some(owned(words));
            }
        }
        if let Some(bound) = self.min_price {
            expected.min_price = Some(limit(bound)?);
        }
        if let Some(bound) = self.max_price {
            expected.max_price = Some(limit(bound)?);
        }
        if let Some(code) = self.language {
            expected.language = Some(code.to_owned());
        }
        if let Some(audience) = self.audience {
            expected.audience = Some(audience);
        }
        if let Some((from, to)) = self.years {
            expected.years = Some((from.map(year), to.map(year)));
        }
        if let Some(like) = self.similar_to {
            let id = match like {
                Like::Title(title) => catalog
                    .by_title(title)
                    .map(|item| item.id.clone())
                    .ok_or_else(|| format!("case error: no catalog item is titled {title:?}"))?,
                Like::Shown(position) => before
                    .and_then(|before| position.pick(before.items))
                    .cloned()
                    .ok_or_else(|| format!("nothing to refer to: the previous answer has no item at {position}"))?,
            };
            expected.similar_to = Some(id);
        }
        for key in &self.absent {
            expected.clear(key);
        }
        expected.absent = self.absent.clone();
        Ok(expected)
    }
}

/// The median as the chat rules take it: the middle price, or the mean of the two
/// middle ones rounded to cents.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        len if len % 2 == 0 => Some(((sorted[middle - 1] + sorted[middle]) / 2.0 * 100.0).round() / 100.0),
        _ => Some(sorted[middle]),
    }
}

impl Expected {
    fn clear(&mut self, key: &str) {
        match key {
            "query" => self.query = None,
            "groups" => self.groups = None,
            "tags" => self.tags = None,
            "excluded_groups" => self.excluded_groups = None,
            "excluded_tags" => self.excluded_tags = None,
            "min_price" => self.min_price = None,
            "max_price" => self.max_price = None,
            "language" => self.language = None,
            "audience" => self.audience = None,
            "years" => self.years = None,
            "similar_to" => self.similar_to = None,
            other => panic!("{other:?} is not a constraints key"),
        }
    }

    /// Why the answer's `constraints` differ from the expectation (empty when they agree).
    pub fn mismatches(&self, constraints: &Value) -> Vec<String> {
        let mut found = Vec::new();
        let mut differs = |key: &str, expected: String| {
            found.push(format!("{key}: expected {expected}, got {}", constraints[key]));
        };
        let lists = [
            ("query", &self.query),
            ("groups", &self.groups),
            ("excluded_groups", &self.excluded_groups),
            ("tags", &self.tags),
            ("excluded_tags", &self.excluded_tags),
        ];
        for (key, expected) in lists {
            if let Some(expected) = expected {
                // Query terms in any case; groups and tags as the catalog spells them.
                if !same_words(expected, &constraints[key], key == "query") {
                    differs(key, format!("{expected:?}"));
                }
            }
        }
        for (key, expected) in [("min_price", self.min_price), ("max_price", self.max_price)] {
            if let Some(limit) = expected {
                if !same_limit(limit, &constraints[key]) {
                    let side = if limit.inclusive { "inclusive" } else { "exclusive" };
                    differs(key, format!("{} {side}", limit.amount));
                }
            }
        }
        if let Some(code) = &self.language {
            let language = &constraints["language"];
            if language["code"] != code.as_str() || language["name"] != language_name(code) {
                differs("language", format!("{code} ({})", language_name(code)));
            }
        }
        if let Some(audience) = self.audience {
            if constraints["audience"] != audience.as_str() {
                differs("audience", audience.as_str().to_owned());
            }
        }
        if let Some((from, to)) = self.years {
            let years = &constraints["years"];
            let end = |value: &Value| value.as_i64().map(|year| year as i32);
            if !years.is_object() || end(&years["from"]) != from || end(&years["to"]) != to {
                differs("years", format!("from {from:?} to {to:?}"));
            }
        }
        if let Some(id) = &self.similar_to {
            if constraints["similar_to"] != id.as_str() {
                differs("similar_to", id.clone());
            }
        }
        for key in &self.absent {
            if !is_absent(&constraints[*key]) {
                differs(key, "no value".into());
            }
        }
        found
    }

    /// Why `item` does not satisfy the expectation (empty when it does).
    pub fn violations(&self, item: &Item) -> Vec<String> {
        let mut why = Vec::new();
        if let Some(limit) = self.max_price {
            let fits = item.price < limit.amount || (limit.inclusive && item.price <= limit.amount);
            if !fits {
                why.push(format!("costs {:.2}, above the ceiling {}", item.price, limit.amount));
            }
        }
        if let Some(limit) = self.min_price {
            let fits = item.price > limit.amount || (limit.inclusive && item.price >= limit.amount);
            if !fits {
                why.push(format!("costs {:.2}, below the floor {}", item.price, limit.amount));
            }
        }
        if let Some(groups) = &self.groups {
            if !groups.iter().any(|group| item.in_group(group)) {
                why.push(format!("not in {groups:?}"));
            }
        }
        if let Some(groups) = &self.excluded_groups {
            if let Some(group) = groups.iter().find(|group| item.in_group(group)) {
                why.push(format!("in the excluded {group}"));
            }
        }
        if let Some(tags) = &self.tags {
            if !tags.iter().any(|tag| item.has_tag(tag)) {
                why.push(format!("not tagged {tags:?}"));
            }
        }
        if let Some(tags) = &self.excluded_tags {
            if let Some(tag) = tags.iter().find(|tag| item.has_tag(tag)) {
                why.push(format!("tagged with the excluded {tag}"));
            }
        }
        if let Some(code) = &self.language {
            if !item.languages.contains(&code.as_str()) {
                why.push(format!("no {code} guide"));
            }
        }
        match self.audience {
            Some(Audience::Kids) if !item.for_kids => why.push("not for kids".into()),
            Some(Audience::Adults) if !item.for_adults => why.push("for children only".into()),
            _ => {}
        }
        if let Some((from, to)) = self.years {
            let inside = item
                .year
                .is_some_and(|year| from.is_none_or(|from| year >= from) && to.is_none_or(|to| year <= to));
            if !inside {
                why.push(format!("year {:?} outside {from:?}..{to:?}", item.year));
            }
        }
        if self.similar_to.as_deref() == Some(item.id.as_str()) {
            why.push("is the item the ranking is like".into());
        }
        why
    }

    /// The catalog items that satisfy the expectation.
    pub fn matching<'a>(&'a self, catalog: &'a Catalog) -> impl Iterator<Item = &'a Item> + 'a {
        catalog.items.iter().filter(|item| self.violations(item).is_empty())
    }

    /// The same expectation without its price limits (what "relax the price" would match).
    pub fn without_price(&self) -> Expected {
        Expected {
            min_price: None,
            max_price: None,
            ..self.clone()
        }
    }
}

/// The same words in any order.
fn same_words(expected: &[String], actual: &Value, any_case: bool) -> bool {
    let fold = |word: &str| if any_case { word.to_lowercase() } else { word.to_owned() };
    let mut actual: Vec<String> = match actual {
        Value::Null => Vec::new(),
        Value::Array(values) => match values.iter().map(|value| value.as_str().map(fold)).collect() {
            Some(words) => words,
            None => return false,
        },
        _ => return false,
    };
    let mut expected: Vec<String> = expected.iter().map(|word| fold(word)).collect();
    actual.sort();
    expected.sort();
    actual == expected
}

fn same_limit(expected: Limit, actual: &Value) -> bool {
    actual["amount"]
        .as_f64()
        .is_some_and(|amount| (amount - expected.amount).abs() <= AMOUNT_TOLERANCE)
        && actual["inclusive"] == expected.inclusive
}

fn is_absent(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(values) => values.is_empty(),
        Value::Object(fields) => fields.is_empty(),
        _ => false,
    }
}

/// The English name chat gives a language code.
fn language_name(code: &str) -> &'static str {
    match code {
        "en" => "English",
        "fr" => "French",
        "de" => "German",
        "es" => "Spanish",
        "it" => "Italian",
        other => panic!("the suite names no language {other:?}"),
    }
}
