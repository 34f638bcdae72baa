//! A message being read: its tokens, which of them a constraint has consumed, and
//! the amounts ("$20", "15k", "30 dollars") they spell.

use super::words::{CURRENCY_WORDS, NOT_PRICE_UNITS};
use crate::chat::text::{tokenize, Token};

/// A message's tokens and which of them a constraint has consumed.
pub(super) struct Reader {
    /// The message's tokens, in order.
    pub(super) tokens: Vec<Token>,
    /// Per token, whether a constraint has already read it.
    pub(super) consumed: Vec<bool>,
}

impl Reader {
    /// Tokenizes `message`; nothing is consumed yet.
    pub(super) fn new(message: &str) -> Reader {
        let tokens = tokenize(message);
        let consumed = vec![false; tokens.len()];
        Reader { tokens, consumed }
    }

    /// The word at `index`, if that token is a word.
    pub(super) fn word(&self, index: usize) -> Option<&str> {
        self.tokens.get(index).and_then(Token::word)
    }

    /// Where the free words `phrase` that start at `index` end (a dash may join two of
    /// them: "high-end", "budget-friendly"), if they do.
    pub(super) fn phrase_end(&self, index: usize, phrase: &[&str]) -> Option<usize> {
        let mut position = index;
        for (offset, word) in phrase.iter().enumerate() {
            if offset > 0 && self.tokens.get(position) == Some(&Token::Dash) && !self.consumed[position] {
                position += 1;
            }
            if self.word(position) != Some(word) || self.consumed[position] {
                return None;
            }
            position += 1;
        }
        Some(position)
    }

    /// Whether the free words `phrase` start at `index`.
    pub(super) fn phrase_at(&self, index: usize, phrase: &[&str]) -> bool {
        self.phrase_end(index, phrase).is_some()
    }

    /// Marks the tokens `from..to` as read by a constraint.
    pub(super) fn consume(&mut self, from: usize, to: usize) {
        for consumed in &mut self.consumed[from..to.min(self.tokens.len())] {
            *consumed = true;
        }
    }

    /// An amount at `index`: `[$]N[k][$|dollars]`. Returns its value, the index after
    /// it, and whether a currency marked it. `None` when a unit says it is no price
    /// ("2 hours", "12 years").
    pub(super) fn amount_at(&self, index: usize) -> Option<(f64, usize, bool)> {
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

    /// The words no constraint consumed yet, with their token index.
    pub(super) fn free_words(&self) -> Vec<(usize, &str)> {
        (0..self.tokens.len())
            .filter(|index| !self.consumed[*index])
            .filter_map(|index| Some((index, self.word(index)?)))
            .collect()
    }
}
