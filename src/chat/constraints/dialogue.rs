//! The passes of [`extract`](super::extract()) that read a message as part of a
//! dialogue rather than as a search: references to the previous answer ("the second
//! one", "it"), questions about an item ("is it available?", "how much is it?"),
//! likeness ("more like the first one", "something like Toy Story"), paging ("more",
//! "anything else"), and the words that only ask for well-known items ("popular",
//! "top"). What they consume never becomes a search term.

use super::reader::Reader;
use super::words::{LIKE_AS_VERB, ORDINALS, POPULAR_WORDS, REFERENCE_NOUNS, TITLE_END};
use super::{Ask, Extracted, Reference, Similar};
use crate::chat::dictionary::LabelDictionary;
use crate::chat::text::{is_stopword, Token};

/// A reference starting at `index`: its kind and the index after it. Ordinals count
/// after "the" or before "one" ("the second", "second one", "the 2nd"); pronouns
/// ("it", "that one", "this one") only where `pronouns` allows.
fn reference_at(reader: &Reader, index: usize, pronouns: bool) -> Option<(Reference, usize)> {
    let after_the = index.checked_sub(1).and_then(|i| reader.word(i)) == Some("the");
    let position = match &reader.tokens.get(index)? {
        Token::Word(word) if word == "last" => Some((Reference::Last, index + 1)),
        Token::Word(word) => ORDINALS
            .iter()
            .find(|(ordinal, _)| ordinal == word)
            .map(|(_, position)| (Reference::Position(*position), index + 1)),
        // "2nd", "3rd": a number and its suffix.
        Token::Number(number)
            if number.fract() == 0.0
                && (1.0..=20.0).contains(number)
                && reader
                    .word(index + 1)
                    .is_some_and(|w| ["st", "nd", "rd", "th"].contains(&w)) =>
        {
            Some((Reference::Position(*number as usize - 1), index + 2))
        }
        _ => None,
    };
    if let Some((reference, end)) = position {
        let noun = reader.word(end).is_some_and(|w| REFERENCE_NOUNS.contains(&w));
        if after_the || noun {
            return Some((reference, end + usize::from(noun)));
        }
        return None;
    }
    if !pronouns {
        return None;
    }
    // "that"/"this" alone name an item only last or before a question word ("is that
    // available?", "how much is this"); elsewhere they join clauses.
    let next = reader.word(index + 1);
    match reader.word(index)? {
        "it" => Some((Reference::It, index + 1)),
        "that" | "this" if next.is_some_and(|w| REFERENCE_NOUNS.contains(&w)) => Some((Reference::It, index + 2)),
        "that" | "this" if next.is_none_or(|w| ["available", "in", "cost", "costs", "sold"].contains(&w)) => {
            Some((Reference::It, index + 1))
        }
        _ => None,
    }
}

/// Ordinal references anywhere ("the second one, is it available?"); pronouns are
/// read by [`questions`] and [`similar`], where they can only mean an item.
pub(super) fn references(reader: &mut Reader, extracted: &mut Extracted) {
    let mut index = 0;
    while index < reader.tokens.len() {
        match reference_at(reader, index, false) {
            Some((reference, end)) if !reader.consumed[index] => {
                extracted.reference.get_or_insert(reference);
                reader.consume(index, end);
                index = end;
            }
            _ => index += 1,
        }
    }
}

/// "is it available?", "in stock?", "how much is the second one?", "what does it
/// cost?": a question about an item when the message names one (or a pronoun does);
/// "available" and "in stock" without one ask for available items only.
pub(super) fn questions(reader: &mut Reader, extracted: &mut Extracted) {
    let mut pronoun = None;
    for index in 0..reader.tokens.len() {
        if !reader.consumed[index] && pronoun.is_none() {
            if let Some(found) = reference_at(reader, index, true) {
                pronoun = Some((index, found));
            }
        }
    }
    // The question word, and the tokens it spans.
    let mut ask = None;
    for index in 0..reader.tokens.len() {
        if reader.consumed[index] {
            continue;
        }
        let Some(word) = reader.word(index) else { continue };
        let next = reader.word(index + 1);
        let before_is_in = index.checked_sub(1).and_then(|i| reader.word(i)) == Some("in");
        let found = match word {
            "available" | "availability" | "unavailable" => (Ask::Availability, index, index + 1),
            "stock" if before_is_in => (Ask::Availability, index - 1, index + 1),
            "stock" => (Ask::Availability, index, index + 1),
            "sold" if next == Some("out") => (Ask::Availability, index, index + 2),
            "how" if matches!(next, Some("much" | "expensive")) => (Ask::Price, index, index + 2),
            "cost" | "costs" | "price" | "pricing" => (Ask::Price, index, index + 1),
            _ => continue,
        };
        // "how much" is the strongest sign of a price question.
        if ask.is_none() || word == "how" {
            ask = Some(found);
        }
    }
    let Some((kind, from, to)) = ask else { return };
    if extracted.reference.is_none() && pronoun.is_none() {
        // "available comedies", "anything in stock": a constraint, not a question.
        if kind == Ask::Availability {
            extracted.available = true;
            reader.consume(from, to);
        }
        return;
    }
    extracted.ask = Some(kind);
    reader.consume(from, to);
    if let Some((index, (reference, end))) = pronoun {
        extracted.reference.get_or_insert(reference);
        reader.consume(index, end);
    }
}

/// "like X", "similar to X", "more like the first one": `X` is an item of the
/// previous answer or a title's words (up to a word that starts another constraint).
/// Words after the trigger that name a group or tag of the catalog ("something like a
/// comedy") are left to the names.
pub(super) fn similar(reader: &mut Reader, dictionary: &LabelDictionary, extracted: &mut Extracted) {
    for index in 0..reader.tokens.len() {
        if reader.consumed[index] {
            continue;
        }
        let length = match reader.word(index) {
            Some("similar") if reader.word(index + 1) == Some("to") => 2,
            Some("similar" | "resembling") => 1,
            Some("like") => {
                let before = index.checked_sub(1).and_then(|i| reader.word(i));
                if before.is_some_and(|w| LIKE_AS_VERB.contains(&w)) {
                    continue;
                }
                1
            }
            _ => continue,
        };
        let start = index + length;
        // "more like the first one": the reference was read already; take it over.
        let referenced = (start..reader.tokens.len().min(start + 3))
            .find(|&i| reader.consumed[i] && reference_at(reader, i, false).is_some());
        if let (Some(_), Some(reference)) = (referenced, extracted.reference) {
            extracted.similar = Some(Similar::Reference(reference));
            extracted.reference = None;
            reader.consume(index, start);
            consume_before(reader, index);
            return;
        }
        if let Some((reference, end)) = reference_at(reader, start, true) {
            extracted.similar = Some(Similar::Reference(reference));
            reader.consume(index, end);
            consume_before(reader, index);
            return;
        }
        let mut end = start;
        while end < reader.tokens.len() && !reader.consumed[end] {
            match &reader.tokens[end] {
                Token::Word(word) if TITLE_END.contains(&word.as_str()) => break,
                Token::Word(_) | Token::Number(_) => end += 1,
                _ => break,
            }
        }
        let words: Vec<String> = (start..end)
            .filter_map(|i| match &reader.tokens[i] {
                Token::Word(word) => Some(word.clone()),
                Token::Number(number) => Some(format!("{number}")),
                _ => None,
            })
            .collect();
        let content: Vec<&str> = words
            .iter()
            .map(String::as_str)
            .filter(|word| !is_stopword(word))
            .collect();
        if content.is_empty() || dictionary.lookup(&content).is_some() {
            continue;
        }
        extracted.similar = Some(Similar::Title(words));
        reader.consume(index, end);
        consume_before(reader, index);
        return;
    }
}

/// "more like", "something like": the word before a likeness trigger is part of it.
fn consume_before(reader: &mut Reader, index: usize) {
    if let Some(before) = index.checked_sub(1) {
        if reader
            .word(before)
            .is_some_and(|w| ["more", "something", "anything", "just"].contains(&w))
        {
            reader.consume(before, index);
        }
    }
}

/// "more", "show me more", "next", "anything else", "other ones": the next items.
pub(super) fn more(reader: &mut Reader, extracted: &mut Extracted) {
    for index in 0..reader.tokens.len() {
        if reader.consumed[index] {
            continue;
        }
        let next = reader.word(index + 1);
        let paging = match reader.word(index) {
            Some("more") => next != Some("than"),
            Some("next" | "others" | "else" | "another") => true,
            Some("other") => next.is_none_or(|w| ["ones", "options", "items", "suggestions", "picks"].contains(&w)),
            _ => false,
        };
        if paging {
            extracted.more = true;
            reader.consume(index, index + 1);
        }
    }
}

/// Words that ask for the best-known items ("popular", "top movies"): the ranking puts
/// them first anyway. "top" followed by a title word ("Top Gun") is left alone.
pub(super) fn popular_words(reader: &mut Reader) {
    for index in 0..reader.tokens.len() {
        if reader.consumed[index] {
            continue;
        }
        let Some(word) = reader.word(index) else { continue };
        if !POPULAR_WORDS.contains(&word) {
            continue;
        }
        if word == "top" {
            let next_is_title = index + 1 < reader.tokens.len()
                && !reader.consumed[index + 1]
                && reader.word(index + 1).is_some_and(|w| !is_stopword(w));
            if next_is_title {
                continue;
            }
        }
        reader.consume(index, index + 1);
    }
}
