//! The words the extractor matches: languages, price and relative-price phrases,
//! currencies, units that make a number no price, audience words, and the noise
//! words that go with a constraint and are no search term.

use super::{Language, PriceBand, YearWord};

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
    &["less", "pricey"],
    &["lower", "priced"],
    &["lower", "price"],
    &["cheaper"],
];

/// Phrases that ask for pricier items than the previous answer.
pub(super) const PRICIER_PHRASES: &[&[&str]] = &[
    &["more", "expensive"],
    &["higher", "priced"],
    &["higher", "end"],
    &["pricier"],
    &["fancier"],
];

/// Price words without an amount, read on the catalog's own prices; longer phrases
/// first, so that "not too expensive" is not read as "expensive".
pub(super) const BAND_PHRASES: &[(&[&str], PriceBand)] = &[
    (&["not", "too", "expensive"], PriceBand::Moderate),
    (&["not", "so", "expensive"], PriceBand::Moderate),
    (&["not", "very", "expensive"], PriceBand::Moderate),
    (&["not", "that", "expensive"], PriceBand::Moderate),
    (&["not", "expensive"], PriceBand::Moderate),
    (&["reasonably", "priced"], PriceBand::Moderate),
    (&["moderately", "priced"], PriceBand::Moderate),
    (&["mid", "range"], PriceBand::Moderate),
    (&["midrange"], PriceBand::Moderate),
    (&["reasonable"], PriceBand::Moderate),
    (&["moderate"], PriceBand::Moderate),
    (&["on", "a", "budget"], PriceBand::Cheap),
    (&["budget", "friendly"], PriceBand::Cheap),
    (&["low", "cost"], PriceBand::Cheap),
    (&["low", "priced"], PriceBand::Cheap),
    (&["lowest", "price"], PriceBand::Cheapest),
    (&["lowest", "prices"], PriceBand::Cheapest),
    (&["cheapest"], PriceBand::Cheapest),
    (&["cheap"], PriceBand::Cheap),
    (&["inexpensive"], PriceBand::Cheap),
    (&["affordable"], PriceBand::Cheap),
    (&["bargain"], PriceBand::Cheap),
    (&["bargains"], PriceBand::Cheap),
    (&["high", "end"], PriceBand::Premium),
    (&["premium"], PriceBand::Premium),
    (&["expensive"], PriceBand::Premium),
    (&["luxury"], PriceBand::Premium),
    (&["luxurious"], PriceBand::Premium),
    (&["upscale"], PriceBand::Premium),
    (&["pricey"], PriceBand::Premium),
    (&["priciest"], PriceBand::Premium),
];

/// Words that rule out the group or tag after them ("no horror", "without comedies",
/// "skip the thrillers"); "but" only after "anything"/"everything"/"all"/"nothing".
pub(super) const NEGATORS: &[&str] = &[
    "no",
    "not",
    "without",
    "except",
    "excluding",
    "exclude",
    "skip",
    "avoid",
    "nothing",
    "none",
    "hate",
    "dislike",
    "never",
    "minus",
    "but",
];

/// Words between a negator and the name it rules out ("not any more horror").
pub(super) const NEGATION_FILLER: &[&str] = &[
    "the",
    "any",
    "more",
    "too",
    "so",
    "very",
    "really",
    "all",
    "of",
    "want",
    "see",
    "like",
    "those",
    "these",
    "a",
    "an",
    "watch",
    "me",
    "show",
    "please",
    "give",
    "just",
    "for",
    "now",
    "anything",
    "something",
    "stuff",
    "kind",
];

/// Ordinal words: "the second one" is the previous answer's item 1 (from 0).
pub(super) const ORDINALS: &[(&str, usize)] = &[
    ("first", 0),
    ("second", 1),
    ("third", 2),
    ("fourth", 3),
    ("fifth", 4),
    ("sixth", 5),
    ("seventh", 6),
    ("eighth", 7),
    ("ninth", 8),
    ("tenth", 9),
];

/// Nouns after an ordinal that make it a reference ("the second one", "the first movie").
pub(super) const REFERENCE_NOUNS: &[&str] = &[
    "one",
    "item",
    "movie",
    "film",
    "option",
    "result",
    "pick",
    "suggestion",
    "tour",
    "product",
    "title",
    "choice",
];

/// Words before "like" that make it a verb ("I'd like", "would like"), not "similar to".
pub(super) const LIKE_AS_VERB: &[&str] = &[
    "i", "id", "you", "we", "they", "would", "d", "really", "also", "don", "dont", "do", "might", "may", "should",
    "kids", "children", "he", "she", "wife", "husband", "son", "daughter",
];

/// Words that end a title after "like" ("like Toy Story for kids").
pub(super) const TITLE_END: &[&str] = &[
    "for", "but", "under", "below", "over", "with", "without", "except", "please", "and", "or", "that", "which",
    "cheaper", "than",
];

/// Words that ask for the catalog's best-known items: the ranking already puts them
/// first, so they are no search terms.
pub(super) const POPULAR_WORDS: &[&str] = &[
    "popular",
    "popularity",
    "trending",
    "hits",
    "famous",
    "greatest",
    "acclaimed",
    "favorite",
    "favorites",
    "favourite",
    "favourites",
    "rated",
    "highly",
    "recommended",
    "top",
    "hot",
    "everything",
    "catalog",
    "catalogue",
    "selection",
    "whatever",
];

/// Decades by name: "the nineties".
pub(super) const DECADE_WORDS: &[(&str, i32)] = &[
    ("thirties", 1930),
    ("forties", 1940),
    ("fifties", 1950),
    ("sixties", 1960),
    ("seventies", 1970),
    ("eighties", 1980),
    ("nineties", 1990),
];

/// Year words read on the catalog's own years.
pub(super) const YEAR_WORDS: &[(&str, YearWord)] = &[
    ("recent", YearWord::Recent),
    ("newest", YearWord::Recent),
    ("latest", YearWord::Recent),
    ("new", YearWord::Recent),
    ("modern", YearWord::Recent),
    ("old", YearWord::Old),
    ("older", YearWord::Old),
    ("oldest", YearWord::Old),
    ("classic", YearWord::Old),
    ("classics", YearWord::Old),
    ("vintage", YearWord::Old),
    ("oldies", YearWord::Old),
];
