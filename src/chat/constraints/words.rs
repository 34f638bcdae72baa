//! The words the extractor matches: languages, price and relative-price phrases,
//! currencies, units that make a number no price, audience words, and the noise
//! words that go with a constraint and are no search term.

use super::Language;

/// Languages by code, name and the other words people use for them.
pub(super) const LANGUAGES: &[(&str, &str, &[&str])] = &[
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
pub(super) const NOISE: &[&str] = &[
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

/// Currency words after a number that mark it as a price.
pub(super) const CURRENCY_WORDS: &[&str] = &[
    "dollar", "dollars", "bucks", "buck", "euro", "euros", "eur", "usd", "pound", "pounds", "gbp", "quid", "yen",
    "chf", "francs", "cad", "aud",
];

/// Units after a number that make it something other than a price.
pub(super) const NOT_PRICE_UNITS: &[&str] = &[
    "year", "years", "yr", "yrs", "yo", "old", "minute", "minutes", "min", "mins", "hour", "hours", "hr", "hrs",
    "star", "stars", "km", "miles", "people", "persons", "guests", "days", "nights", "percent",
];

/// Words that ask for items suitable for children.
pub(super) const KIDS_WORDS: &[&str] = &[
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
/// Words that ask for items for adults.
pub(super) const ADULT_WORDS: &[&str] = &["adults", "adult", "grownups", "mature"];

/// Phrases before an amount that make it a ceiling; `true` when the amount itself is allowed.
pub(super) const CEILING_PHRASES: &[(&[&str], bool)] = &[
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

/// Phrases before an amount that make it a floor; `true` when the amount itself is allowed.
pub(super) const FLOOR_PHRASES: &[(&[&str], bool)] = &[
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

/// Phrases that ask for cheaper items than the previous answer.
pub(super) const CHEAPER_PHRASES: &[&[&str]] = &[
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

/// Phrases that ask for pricier items than the previous answer.
pub(super) const PRICIER_PHRASES: &[&[&str]] = &[
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
