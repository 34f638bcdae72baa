//! [`extract`]: reads the constraints out of one message, one pass per kind of
//! constraint, each consuming the tokens it understood; the words left are the
//! free-text terms.

use super::dialogue::{more, popular_words, questions, references, similar};
use super::reader::Reader;
use super::words::{
    ADULT_WORDS, BAND_PHRASES, CEILING_PHRASES, CHEAPER_PHRASES, FLOOR_PHRASES, KIDS_WORDS, LANGUAGES, NEGATION_FILLER,
    NEGATORS, NOISE, PRICIER_PHRASES,
};
use super::years::{year_words, years};
use super::{Audience, Extracted, Language, PriceBound, PriceLimit, RelativePrice};
use crate::chat::dictionary::{EntryKind, LabelDictionary};
use crate::chat::text::{is_stopword, Token};

/// Reads one message (see the `constraints` module documentation).
pub fn extract(message: &str, dictionary: &LabelDictionary) -> Extracted {
    let mut reader = Reader::new(message);
    let mut extracted = Extracted::default();
    commands(&mut reader, &mut extracted);
    references(&mut reader, &mut extracted);
    ages(&mut reader, dictionary, &mut extracted);
    years(&mut reader, &mut extracted);
    price_ranges(&mut reader, &mut extracted);
    price_bounds(&mut reader, &mut extracted);
    relative_price(&mut reader, &mut extracted);
    price_bands(&mut reader, &mut extracted);
    questions(&mut reader, &mut extracted);
    languages(&mut reader, &mut extracted);
    similar(&mut reader, dictionary, &mut extracted);
    names(&mut reader, dictionary, &mut extracted);
    year_words(&mut reader, &mut extracted);
    more(&mut reader, &mut extracted);
    popular_words(&mut reader);
    (extracted.terms, extracted.negated_terms) = terms(&reader);
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
/// A kids word that starts a longer name the catalog has ("family friendly" as a
/// tag) is left to [`names`].
fn ages(reader: &mut Reader, dictionary: &LabelDictionary, extracted: &mut Extracted) {
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
            Token::Word(word)
                if KIDS_WORDS.contains(&word.as_str())
                    && reader
                        .word(index + 1)
                        .is_none_or(|next| dictionary.lookup(&[word.as_str(), next]).is_none()) =>
            {
                extracted.audience = Some(Audience::Kids);
                reader.consume(index, index + 1);
                // "kids under 10": an age, not a price ("kids under 10 dollars" is a price).
                if reader.word(index + 1).is_some_and(|w| ["under", "below"].contains(&w)) {
                    if let Some((_, _, false)) = reader.amount_at(index + 2) {
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
            if let Some(end) = phrases.iter().find_map(|phrase| reader.phrase_end(index, phrase)) {
                extracted.relative = Some(relative);
                reader.consume(index, end);
            }
        }
    }
}

/// "cheap", "cheapest", "not too expensive", "premium": bands of the catalog's prices.
fn price_bands(reader: &mut Reader, extracted: &mut Extracted) {
    for index in 0..reader.tokens.len() {
        let found = BAND_PHRASES
            .iter()
            .find_map(|(phrase, band)| Some((reader.phrase_end(index, phrase)?, band)));
        if let Some((end, band)) = found {
            extracted.band.get_or_insert(*band);
            reader.consume(index, end);
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

/// Group names and tags of the dictionary, longest names first.
fn names(reader: &mut Reader, dictionary: &LabelDictionary, extracted: &mut Extracted) {
    if dictionary.is_empty() {
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
            let longest = (1..=dictionary.max_words().min(run.len() - start))
                .rev()
                .find_map(|length| {
                    let window: Vec<&str> = run[start..start + length].iter().map(|(_, w)| *w).collect();
                    dictionary.lookup(&window).map(|entry| (length, entry))
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
    // "walking or bike tours": a word before "or"/"and" that names something with the
    // last word of the name after it.
    let mut shared = Vec::new();
    for (from, to, _) in &found {
        let (Some(last), Some(joiner)) = (reader.word(to - 1), from.checked_sub(1)) else {
            continue;
        };
        if to - from < 2 || !matches!(reader.word(joiner), Some("or" | "and")) {
            continue;
        }
        let Some(before) = joiner.checked_sub(1) else { continue };
        if reader.consumed[before] {
            continue;
        }
        if let Some(entry) = reader.word(before).and_then(|word| dictionary.lookup(&[word, last])) {
            shared.push((before, before + 1, entry.clone()));
        }
    }
    found.extend(shared);
    found.sort_by_key(|(from, _, _)| *from);
    let mut previous_negated = false;
    for (from, to, entry) in found {
        let negator = negator_before(reader, from, previous_negated);
        previous_negated = negator.is_some();
        reader.consume(negator.unwrap_or(from), to);
        let list = match (entry.kind, previous_negated) {
            (EntryKind::Group, false) => &mut extracted.groups,
            (EntryKind::Tag, false) => &mut extracted.tags,
            (EntryKind::Group, true) => &mut extracted.excluded_groups,
            (EntryKind::Tag, true) => &mut extracted.excluded_tags,
        };
        if !list.contains(&entry.display) {
            list.push(entry.display);
        }
    }
}

/// Where the words ruling out the name at `index` start, if they do: a negator a few
/// filler words before it ("no horror", "not any more horror", "skip the comedies",
/// "anything but horror", "I don't want thrillers"), or "or"/"nor"/"and" after a name
/// that was ruled out ("no horror or thrillers").
fn negator_before(reader: &Reader, index: usize, previous_negated: bool) -> Option<usize> {
    let mut at = index;
    for _ in 0..4 {
        at = at.checked_sub(1)?;
        let word = reader.word(at)?;
        let negates = match word {
            "but" => at
                .checked_sub(1)
                .and_then(|i| reader.word(i))
                .is_some_and(|w| ["anything", "everything", "all", "nothing"].contains(&w)),
            // "don't want", "dont like": the apostrophe split "don" from "t".
            "don" | "dont" | "doesn" | "didn" => true,
            "or" | "nor" | "and" => previous_negated,
            _ => NEGATORS.contains(&word),
        };
        if negates {
            return Some(at);
        }
        // "t" is what the apostrophe left of "don't".
        let filler = NEGATION_FILLER.contains(&word) || word == "t";
        if !filler {
            return None;
        }
    }
    None
}

/// The words and numbers no constraint consumed, minus stopwords and noise.
/// Words a negator rules out ("no gore") are no search terms: they come second.
fn terms(reader: &Reader) -> (Vec<String>, Vec<String>) {
    let mut terms: Vec<String> = Vec::new();
    let mut negated: Vec<String> = Vec::new();
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
        let list = match negator_before(reader, index, false) {
            Some(_) => &mut negated,
            None => &mut terms,
        };
        if !list.contains(&term) {
            list.push(term);
        }
    }
    (terms, negated)
}
