//! Constraints of a conversation, extracted from each message and carried across
//! turns.
//!
//! [`extract`] reads one message against the catalog [`Vocabulary`]: price bounds
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

use serde::{Deserialize, Serialize};

use super::text::{is_stopword, tokenize, Token};
use super::vocabulary::{Vocabulary, VocabularyKind};

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

impl Constraints {
    /// Merges one message (see the module table); `last_prices` are the prices of
    /// the items of the previous answer.
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

/// Languages by code, name and the other words people use for them.
const LANGUAGES: &[(&str, &str, &[&str])] = &[
    ("en", "English", &["english"]),
    ("fr", "French", &["french", "francais", "français"]),
    ("es", "Spanish", &["spanish", "espanol", "español", "castilian"]),
    ("de", "German", &["german", "deutsch"]),
    ("it", "Italian", &["italian", "italiano"]),
    ("pt", "Portuguese", &["portuguese", "brazilian"]),
    ("nl", "Dutch", &["dutch", "flemish"]),
    ("ja", "Japanese", &["japanese"]),
    ("zh", "Chinese", &["chinese", "mandarin", "cantonese"]),
    ("ko", "Korean", &["korean"]),
    ("ru", "Russian", &["russian"]),
    ("ar", "Arabic", &["arabic"]),
    ("hi", "Hindi", &["hindi"]),
    ("sv", "Swedish", &["swedish"]),
    ("no", "Norwegian", &["norwegian"]),
    ("da", "Danish", &["danish"]),
    ("fi", "Finnish", &["finnish"]),
    ("pl", "Polish", &["polish"]),
    ("el", "Greek", &["greek"]),
    ("tr", "Turkish", &["turkish"]),
    ("he", "Hebrew", &["hebrew"]),
    ("cs", "Czech", &["czech"]),
    ("hu", "Hungarian", &["hungarian"]),
];

/// The language a catalog value names, by code or by name (`"en"`, `"English"`, `"en-GB"`).
pub fn language_of(value: &str) -> Option<Language> {
    let lower = value.trim().to_lowercase();
    let code = lower.split(['-', '_']).next().unwrap_or_default();
    LANGUAGES
        .iter()
        .find(|(language_code, _, words)| *language_code == code || words.contains(&lower.as_str()))
        .map(|(code, name, _)| Language {
            code: (*code).to_owned(),
            name: (*name).to_owned(),
        })
}

/// Words that go with a price or language phrase and mean nothing on their own.
const NOISE: &[&str] = &[
    "price",
    "prices",
    "priced",
    "pricing",
    "cost",
    "costs",
    "costing",
    "budget",
    "money",
    "dollar",
    "dollars",
    "bucks",
    "euro",
    "euros",
    "pound",
    "pounds",
    "usd",
    "eur",
    "gbp",
    "guide",
    "guided",
    "guides",
    "language",
    "languages",
    "spoken",
    "speaking",
    "subtitles",
    "subtitled",
    "dubbed",
    "age",
    "ages",
    "aged",
    "year",
    "years",
    "old",
    "genre",
    "genres",
    "category",
    "categories",
    "type",
    "types",
    "tag",
    "tags",
    "also",
    "plus",
    "additionally",
    "well",
];

const CURRENCY_WORDS: &[&str] = &[
    "dollar", "dollars", "bucks", "buck", "euro", "euros", "eur", "usd", "pound", "pounds", "gbp", "quid", "yen",
    "chf", "francs", "cad", "aud",
];

/// Units after a number that make it something other than a price.
const NOT_PRICE_UNITS: &[&str] = &[
    "year", "years", "yr", "yrs", "yo", "old", "minute", "minutes", "min", "mins", "hour", "hours", "hr", "hrs",
    "star", "stars", "km", "miles", "people", "persons", "guests", "days", "nights", "percent",
];

const KIDS_WORDS: &[&str] = &[
    "kids",
    "kid",
    "children",
    "child",
    "childrens",
    "family",
    "families",
    "toddler",
    "toddlers",
    "kiddos",
];
const ADULT_WORDS: &[&str] = &["adults", "adult", "grownups", "mature"];

const CEILING_PHRASES: &[(&[&str], bool)] = &[
    (&["no", "more", "than"], true),
    (&["not", "more", "than"], true),
    (&["less", "than"], false),
    (&["lower", "than"], false),
    (&["cheaper", "than"], false),
    (&["at", "most"], true),
    (&["up", "to"], true),
    (&["not", "over"], true),
    (&["budget", "of"], true),
    (&["budget", "is"], true),
    (&["under"], false),
    (&["below"], false),
    (&["beneath"], false),
    (&["max"], true),
    (&["maximum"], true),
    (&["budget"], true),
];

const FLOOR_PHRASES: &[(&[&str], bool)] = &[
    (&["more", "expensive", "than"], false),
    (&["more", "than"], false),
    (&["higher", "than"], false),
    (&["pricier", "than"], false),
    (&["at", "least"], true),
    (&["starting", "at"], true),
    (&["over"], false),
    (&["above"], false),
    (&["min"], true),
    (&["minimum"], true),
];

const CHEAPER_PHRASES: &[&[&str]] = &[
    &["less", "expensive"],
    &["not", "so", "expensive"],
    &["not", "too", "expensive"],
    &["lower", "priced"],
    &["lower", "price"],
    &["cheaper"],
    &["cheap"],
    &["cheapest"],
    &["inexpensive"],
    &["affordable"],
];

const PRICIER_PHRASES: &[&[&str]] = &[
    &["more", "expensive"],
    &["higher", "priced"],
    &["higher", "end"],
    &["pricier"],
    &["expensive"],
    &["premium"],
    &["fancier"],
    &["upscale"],
    &["luxury"],
];

/// A message's tokens and which of them a constraint has consumed.
struct Reader {
    tokens: Vec<Token>,
    consumed: Vec<bool>,
}

impl Reader {
    fn new(message: &str) -> Reader {
        let tokens = tokenize(message);
        let consumed = vec![false; tokens.len()];
        Reader { tokens, consumed }
    }

    fn word(&self, index: usize) -> Option<&str> {
        self.tokens.get(index).and_then(Token::word)
    }

    /// Whether the free words `phrase` start at `index`.
    fn phrase_at(&self, index: usize, phrase: &[&str]) -> bool {
        phrase
            .iter()
            .enumerate()
            .all(|(offset, word)| self.word(index + offset) == Some(word) && !self.consumed[index + offset])
    }

    fn consume(&mut self, from: usize, to: usize) {
        for consumed in &mut self.consumed[from..to.min(self.tokens.len())] {
            *consumed = true;
        }
    }

    /// An amount at `index`: `[$]N[k][$|dollars]`. Returns its value, the index after
    /// it, and whether a currency marked it. `None` when a unit says it is no price
    /// ("2 hours", "12 years").
    fn amount_at(&self, index: usize) -> Option<(f64, usize, bool)> {
        let mut position = index;
        let mut marked = false;
        if matches!(self.tokens.get(position), Some(Token::Currency(_))) {
            position += 1;
            marked = true;
        }
        let Some(Token::Number(value)) = self.tokens.get(position) else {
            return None;
        };
        if self.consumed[position] {
            return None;
        }
        let mut value = *value;
        position += 1;
        if self.word(position) == Some("k") {
            value *= 1000.0;
            position += 1;
        }
        match self.tokens.get(position) {
            Some(Token::Currency(_)) => {
                position += 1;
                marked = true;
            }
            Some(Token::Word(word)) if CURRENCY_WORDS.contains(&word.as_str()) => {
                position += 1;
                marked = true;
            }
            Some(Token::Word(word)) if NOT_PRICE_UNITS.contains(&word.as_str()) => return None,
            Some(Token::Plus) => return None,
            _ => {}
        }
        Some((value, position, marked))
    }

    fn free_words(&self) -> Vec<(usize, &str)> {
        (0..self.tokens.len())
            .filter(|index| !self.consumed[*index])
            .filter_map(|index| Some((index, self.word(index)?)))
            .collect()
    }
}

/// Reads one message (see the module documentation).
pub fn extract(message: &str, vocabulary: &Vocabulary) -> Extracted {
    let mut reader = Reader::new(message);
    let mut extracted = Extracted::default();
    commands(&mut reader, &mut extracted);
    ages(&mut reader, &mut extracted);
    price_ranges(&mut reader, &mut extracted);
    price_bounds(&mut reader, &mut extracted);
    relative_price(&mut reader, &mut extracted);
    languages(&mut reader, &mut extracted);
    names(&mut reader, vocabulary, &mut extracted);
    extracted.terms = terms(&reader);
    extracted
}

/// "start over", "any price", "any genre", "any language", "any age", and the
/// additive markers.
fn commands(reader: &mut Reader, extracted: &mut Extracted) {
    for index in 0..reader.tokens.len() {
        let two = |reader: &Reader, first: &str, seconds: &[&str]| {
            reader.word(index) == Some(first) && reader.word(index + 1).is_some_and(|w| seconds.contains(&w))
        };
        if two(reader, "start", &["over", "again", "afresh"])
            || two(reader, "new", &["search", "conversation", "topic"])
            || reader.word(index) == Some("reset")
        {
            extracted.reset = true;
            reader.consume(index, index + 2);
        } else if two(reader, "any", &["price", "prices", "budget", "cost"])
            || two(reader, "whatever", &["price", "budget", "cost"])
        {
            extracted.clear_price = true;
            reader.consume(index, index + 2);
        } else if two(
            reader,
            "any",
            &["genre", "genres", "category", "categories", "group", "kind", "type"],
        ) || two(reader, "all", &["genres", "categories", "groups", "kinds", "types"])
        {
            extracted.clear_groups = true;
            reader.consume(index, index + 2);
        } else if two(reader, "any", &["language", "languages"]) {
            extracted.clear_language = true;
            reader.consume(index, index + 2);
        } else if two(reader, "any", &["age", "ages", "audience"]) {
            extracted.clear_audience = true;
            reader.consume(index, index + 2);
        }
    }
    let first = reader.word(0);
    extracted.additive = matches!(first, Some("and" | "or"))
        || reader.tokens.iter().enumerate().any(|(index, token)| {
            matches!(token.word(), Some("also" | "too" | "plus" | "additionally"))
                || (token.is_word("as") && reader.word(index + 1) == Some("well"))
        });
}

/// "18+", "under 12 years", "ages 6-12", "kids under 10", and the audience words.
fn ages(reader: &mut Reader, extracted: &mut Extracted) {
    let audience_of = |age: f64| match age {
        age if age >= 18.0 => Some(Audience::Adults),
        age if age <= 13.0 => Some(Audience::Kids),
        _ => None,
    };
    for index in 0..reader.tokens.len() {
        if reader.consumed[index] {
            continue;
        }
        let token = reader.tokens[index].clone();
        match &token {
            Token::Number(age) if reader.tokens.get(index + 1) == Some(&Token::Plus) => {
                if let Some(audience) = audience_of(*age) {
                    extracted.audience = Some(audience);
                }
                reader.consume(index, index + 2);
            }
            Token::Number(age)
                if reader
                    .word(index + 1)
                    .is_some_and(|w| ["year", "years", "yr", "yrs", "yo"].contains(&w)) =>
            {
                let before = index.checked_sub(1).and_then(|i| reader.word(i));
                let audience = match before {
                    Some("under" | "below" | "younger") => Some(Audience::Kids),
                    Some("over" | "above" | "older") if *age >= 18.0 => Some(Audience::Adults),
                    _ => audience_of(*age),
                };
                extracted.audience = audience.or(extracted.audience);
                let from = if before.is_some() { index - 1 } else { index };
                let old = usize::from(reader.word(index + 2) == Some("old"));
                reader.consume(from, index + 2 + old);
            }
            Token::Word(word) if ["age", "ages", "aged"].contains(&word.as_str()) => {
                if let Some(Token::Number(age)) = reader.tokens.get(index + 1) {
                    extracted.audience = audience_of(*age).or(extracted.audience);
                    let mut end = index + 2;
                    if reader.tokens.get(end) == Some(&Token::Dash) || reader.word(end) == Some("to") {
                        if let Some(Token::Number(_)) = reader.tokens.get(end + 1) {
                            end += 2;
                        }
                    }
                    reader.consume(index, end);
                }
            }
            Token::Word(word) if KIDS_WORDS.contains(&word.as_str()) => {
                extracted.audience = Some(Audience::Kids);
                reader.consume(index, index + 1);
                // "kids under 10": an age, not a price.
                if reader.word(index + 1).is_some_and(|w| ["under", "below"].contains(&w)) {
                    if let Some(Token::Number(_)) = reader.tokens.get(index + 2) {
                        reader.consume(index + 1, index + 3);
                    }
                }
            }
            Token::Word(word) if ADULT_WORDS.contains(&word.as_str()) => {
                extracted.audience = Some(Audience::Adults);
                reader.consume(index, index + 1);
            }
            Token::Word(word) if word == "grown" && reader.word(index + 1) == Some("ups") => {
                extracted.audience = Some(Audience::Adults);
                reader.consume(index, index + 2);
            }
            _ => {}
        }
    }
}

/// "between 10 and 20", "from 10 to 20", "$10-$20", "10 to 20 dollars". A bare
/// "10-20" is a price only with a currency or after "price"/"priced"/"costing".
fn price_ranges(reader: &mut Reader, extracted: &mut Extracted) {
    for index in 0..reader.tokens.len() {
        if reader.consumed[index] {
            continue;
        }
        let introduced = reader.word(index).filter(|w| ["between", "from"].contains(w));
        let start = if introduced.is_some() { index + 1 } else { index };
        let Some((low, after_low, low_marked)) = reader.amount_at(start) else {
            continue;
        };
        let joined = match reader.tokens.get(after_low) {
            Some(Token::Dash) => true,
            Some(Token::Word(word)) => word == "to" || (word == "and" && introduced == Some("between")),
            _ => false,
        };
        if !joined {
            continue;
        }
        let Some((high, end, high_marked)) = reader.amount_at(after_low + 1) else {
            continue;
        };
        let priced_before = index
            .checked_sub(1)
            .and_then(|i| reader.word(i))
            .is_some_and(|w| ["price", "priced", "cost", "costs", "costing", "budget"].contains(&w));
        // "from 1990 to 1995" names years: unmarked whole numbers that look like years are none.
        let years = [low, high]
            .iter()
            .all(|n| n.fract() == 0.0 && (1850.0..=2100.0).contains(n));
        let unmarked_range = introduced == Some("between") || (introduced == Some("from") && !years);
        if unmarked_range || low_marked || high_marked || priced_before {
            extracted.price = Some(PriceBound::Range(low.min(high), low.max(high)));
            reader.consume(index, end);
            return;
        }
    }
}

/// "under 20", "max 25", "at least 10", "< 30", and a lone "$20" (a ceiling).
fn price_bounds(reader: &mut Reader, extracted: &mut Extracted) {
    if extracted.price.is_some() {
        return;
    }
    for index in 0..reader.tokens.len() {
        if reader.consumed[index] {
            continue;
        }
        let symbol = match reader.tokens[index] {
            Token::Less => Some((1, PriceBound::Ceiling(PriceLimit::exclusive(0.0)))),
            Token::Greater => Some((1, PriceBound::Floor(PriceLimit::exclusive(0.0)))),
            _ => None,
        };
        let phrase = symbol.or_else(|| {
            let ceiling = CEILING_PHRASES
                .iter()
                .find(|(phrase, _)| reader.phrase_at(index, phrase))
                .map(|(phrase, inclusive)| {
                    let limit = PriceLimit {
                        amount: 0.0,
                        inclusive: *inclusive,
                    };
                    (phrase.len(), PriceBound::Ceiling(limit))
                });
            ceiling.or_else(|| {
                FLOOR_PHRASES
                    .iter()
                    .find(|(phrase, _)| reader.phrase_at(index, phrase))
                    .map(|(phrase, inclusive)| {
                        let limit = PriceLimit {
                            amount: 0.0,
                            inclusive: *inclusive,
                        };
                        (phrase.len(), PriceBound::Floor(limit))
                    })
            })
        });
        let Some((length, bound)) = phrase else { continue };
        let Some((amount, end, _)) = reader.amount_at(index + length) else {
            continue;
        };
        extracted.price = Some(match bound {
            PriceBound::Ceiling(limit) => PriceBound::Ceiling(PriceLimit { amount, ..limit }),
            PriceBound::Floor(limit) => PriceBound::Floor(PriceLimit { amount, ..limit }),
            range => range,
        });
        reader.consume(index, end);
        return;
    }
    for index in 0..reader.tokens.len() {
        if reader.consumed[index] {
            continue;
        }
        if let Some((amount, end, true)) = reader.amount_at(index) {
            extracted.price = Some(PriceBound::Ceiling(PriceLimit::inclusive(amount)));
            reader.consume(index, end);
            return;
        }
    }
}

/// "cheaper", "less expensive", "more expensive", "pricier".
fn relative_price(reader: &mut Reader, extracted: &mut Extracted) {
    for index in 0..reader.tokens.len() {
        for (phrases, relative) in [
            (CHEAPER_PHRASES, RelativePrice::Cheaper),
            (PRICIER_PHRASES, RelativePrice::Pricier),
        ] {
            if let Some(phrase) = phrases.iter().find(|phrase| reader.phrase_at(index, phrase)) {
                extracted.relative = Some(relative);
                reader.consume(index, index + phrase.len());
            }
        }
    }
}

/// "in French", "spanish", "with an English guide".
fn languages(reader: &mut Reader, extracted: &mut Extracted) {
    for index in 0..reader.tokens.len() {
        if reader.consumed[index] {
            continue;
        }
        let Some(word) = reader.word(index) else { continue };
        let Some((code, name, _)) = LANGUAGES.iter().find(|(_, _, words)| words.contains(&word)) else {
            continue;
        };
        extracted.language = Some(Language {
            code: (*code).to_owned(),
            name: (*name).to_owned(),
        });
        reader.consume(index, index + 1);
    }
}

/// Group names and tags of the vocabulary, longest names first.
fn names(reader: &mut Reader, vocabulary: &Vocabulary, extracted: &mut Extracted) {
    if vocabulary.is_empty() {
        return;
    }
    let words = reader.free_words();
    // Runs of words adjacent in the message (a dash may join them: "sci-fi").
    let mut runs: Vec<Vec<(usize, &str)>> = Vec::new();
    for (index, word) in words {
        let adjacent = runs.last().and_then(|run| run.last()).is_some_and(|(last, _)| {
            (last + 1..index).all(|between| reader.tokens[between] == Token::Dash && !reader.consumed[between])
        });
        match runs.last_mut() {
            Some(run) if adjacent => run.push((index, word)),
            _ => runs.push(vec![(index, word)]),
        }
    }
    let mut found = Vec::new();
    for run in &runs {
        let mut start = 0;
        while start < run.len() {
            let longest = (1..=vocabulary.max_words().min(run.len() - start))
                .rev()
                .find_map(|length| {
                    let window: Vec<&str> = run[start..start + length].iter().map(|(_, w)| *w).collect();
                    vocabulary.lookup(&window).map(|entry| (length, entry))
                });
            match longest {
                Some((length, entry)) => {
                    found.push((run[start].0, run[start + length - 1].0 + 1, entry.clone()));
                    start += length;
                }
                None => start += 1,
            }
        }
    }
    for (from, to, entry) in found {
        reader.consume(from, to);
        let list = match entry.kind {
            VocabularyKind::Group => &mut extracted.groups,
            VocabularyKind::Tag => &mut extracted.tags,
        };
        if !list.contains(&entry.display) {
            list.push(entry.display);
        }
    }
}

/// The words and numbers no constraint consumed, minus stopwords and noise.
fn terms(reader: &Reader) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for (index, token) in reader.tokens.iter().enumerate() {
        if reader.consumed[index] {
            continue;
        }
        let term = match token {
            Token::Word(word) if word.chars().count() >= 2 && !is_stopword(word) && !NOISE.contains(&word.as_str()) => {
                word.clone()
            }
            Token::Number(number) if number.fract() == 0.0 => format!("{number:.0}"),
            Token::Number(number) => number.to_string(),
            _ => continue,
        };
        if !terms.contains(&term) {
            terms.push(term);
        }
    }
    terms
}

#[cfg(test)]
#[path = "constraints_tests.rs"]
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
