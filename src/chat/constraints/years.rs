//! The passes of [`extract`](super::extract()) that read years: decades ("the 90s",
//! "1990s", "the nineties"), single years and ranges of them ("from 1995", "before
//! 1980", "between 1990 and 1995"), and year words read on the catalog's own years
//! ("recent", "classic").

use super::reader::Reader;
use super::words::{DECADE_WORDS, YEAR_WORDS};
use super::{Extracted, YearRange};
use crate::chat::text::Token;

/// Earliest and latest years a bare number may name.
const YEARS: std::ops::RangeInclusive<f64> = 1850.0..=2100.0;

/// A year at `index`: a whole number in [`YEARS`] that no currency marks.
fn year_at(reader: &Reader, index: usize) -> Option<i32> {
    match reader.tokens.get(index)? {
        Token::Number(number) if number.fract() == 0.0 && YEARS.contains(number) && !reader.consumed[index] => {
            let marked = matches!(reader.tokens.get(index + 1), Some(Token::Currency(_)))
                || index
                    .checked_sub(1)
                    .is_some_and(|before| matches!(reader.tokens[before], Token::Currency(_)));
            (!marked).then_some(*number as i32)
        }
        _ => None,
    }
}

/// A decade at `index` and the index after it: "90s", "1990s", "'90s", "nineties".
fn decade_at(reader: &Reader, index: usize) -> Option<(i32, usize)> {
    if reader.consumed.get(index).copied().unwrap_or(true) {
        return None;
    }
    if let Some(word) = reader.word(index) {
        let (_, start) = DECADE_WORDS.iter().find(|(name, _)| *name == word)?;
        return Some((*start, index + 1));
    }
    let Some(Token::Number(number)) = reader.tokens.get(index) else {
        return None;
    };
    if reader.word(index + 1) != Some("s") || number.fract() != 0.0 || number % 10.0 != 0.0 {
        return None;
    }
    let start = match *number as i32 {
        two_digits @ 0..=90 if two_digits < 30 => 2000 + two_digits,
        two_digits @ 0..=90 => 1900 + two_digits,
        year if YEARS.contains(&f64::from(year)) => year,
        _ => return None,
    };
    Some((start, index + 2))
}

/// Decades, years and ranges of years; the words that introduce them go with them.
pub(super) fn years(reader: &mut Reader, extracted: &mut Extracted) {
    for index in 0..reader.tokens.len() {
        if reader.consumed[index] {
            continue;
        }
        let introducer = reader.word(index);
        let start = match introducer {
            Some("from" | "in" | "before" | "after" | "since" | "until" | "till" | "between" | "pre" | "post") => {
                index + 1
            }
            _ => index,
        };
        let start = start + usize::from(reader.word(start) == Some("the"));
        if let Some((decade, end)) = decade_at(reader, start) {
            extracted.years = Some(period(introducer, decade, decade + 9));
            reader.consume(index, end);
            return;
        }
        let Some(year) = year_at(reader, start) else { continue };
        // "from 1990 to 1995", "between 1990 and 1995", "1990-1995".
        let joined = match reader.tokens.get(start + 1) {
            Some(Token::Dash) => true,
            Some(Token::Word(word)) => word == "to" || (word == "and" && introducer == Some("between")),
            _ => false,
        };
        if let (true, Some(until)) = (joined, year_at(reader, start + 2)) {
            extracted.years = Some(YearRange {
                from: Some(year.min(until)),
                to: Some(year.max(until)),
            });
            reader.consume(index, start + 3);
            return;
        }
        // A bare year may be part of a title ("2001"): left to the search.
        if introducer.is_none() || introducer == Some("between") {
            continue;
        }
        extracted.years = Some(period(introducer, year, year));
        reader.consume(index, start + 1);
        return;
    }
}

/// The years a period from `first` to `last` (a year, or a decade's ten) names after
/// its introducer: "before" ends before it, "after" starts after it, "since" starts
/// with it, and "from"/"in" or none is the period itself.
fn period(introducer: Option<&str>, first: i32, last: i32) -> YearRange {
    match introducer {
        Some("before" | "pre" | "until" | "till") => YearRange {
            from: None,
            to: Some(first - 1),
        },
        Some("after" | "post") => YearRange {
            from: Some(last + 1),
            to: None,
        },
        Some("since") => YearRange {
            from: Some(first),
            to: None,
        },
        _ => YearRange {
            from: Some(first),
            to: Some(last),
        },
    }
}

/// "recent", "latest", "old", "classic": years read on the catalog's own (later,
/// with its [`Scale`](super::Scale)); only when no years were named.
pub(super) fn year_words(reader: &mut Reader, extracted: &mut Extracted) {
    for index in 0..reader.tokens.len() {
        if reader.consumed[index] {
            continue;
        }
        let Some(word) = reader.word(index) else { continue };
        if let Some((_, year_word)) = YEAR_WORDS.iter().find(|(name, _)| *name == word) {
            if extracted.years.is_none() {
                extracted.year_word = Some(*year_word);
            }
            reader.consume(index, index + 1);
        }
    }
}
