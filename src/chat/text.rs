//! The words of a chat message: a small tokenizer that keeps numbers, currency
//! marks and the symbols price phrases use (`-`, `+`, `<`, `>`), plural/singular
//! forms, and the words that carry no search meaning.

/// One token of a message, lowercased.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    /// Letters and digits starting with a letter (`comedies`, `sci`, `mp3`).
    Word(String),
    /// A number: `12`, `12.50`, `1,000`.
    Number(f64),
    /// `$`, `€`, `£`, `¥`.
    Currency(char),
    /// `-` or `–` between numbers or words.
    Dash,
    /// `+` (as in `18+`).
    Plus,
    /// `<` or `≤`.
    Less,
    /// `>` or `≥`.
    Greater,
}

impl Token {
    pub fn word(&self) -> Option<&str> {
        match self {
            Token::Word(word) => Some(word),
            _ => None,
        }
    }

    pub fn is_word(&self, expected: &str) -> bool {
        self.word() == Some(expected)
    }
}

/// Splits a message into tokens; other punctuation separates tokens and is dropped.
/// A possessive `'s` is dropped (`children's` → `children`).
pub fn tokenize(message: &str) -> Vec<Token> {
    let lower = message.to_lowercase();
    let chars: Vec<char> = lower.chars().collect();
    let mut tokens = Vec::new();
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        if c.is_ascii_digit() || (c == '.' && chars.get(index + 1).is_some_and(char::is_ascii_digit)) {
            let start = index;
            while index < chars.len() {
                let c = chars[index];
                // A point or comma followed by a digit continues a number; a point may
                // also start one (".5"): the branch is entered on it, so it must be read.
                let separator = (c == '.' || c == ',') && chars.get(index + 1).is_some_and(char::is_ascii_digit);
                let inner_separator = separator && (index > start || c == '.');
                if c.is_ascii_digit() || inner_separator {
                    index += 1;
                } else {
                    break;
                }
            }
            let text: String = chars[start..index].iter().filter(|c| **c != ',').collect();
            if let Ok(value) = text.parse::<f64>() {
                tokens.push(Token::Number(value));
            }
            continue;
        }
        if c.is_alphabetic() {
            let start = index;
            while index < chars.len() && (chars[index].is_alphanumeric() || is_apostrophe(chars[index])) {
                index += 1;
            }
            let word: String = chars[start..index].iter().collect();
            let word = word.split(is_apostrophe).next().unwrap_or_default().to_owned();
            if !word.is_empty() {
                tokens.push(Token::Word(word));
            }
            continue;
        }
        match c {
            '$' | '€' | '£' | '¥' => tokens.push(Token::Currency(c)),
            '-' | '–' | '—' => tokens.push(Token::Dash),
            '+' => tokens.push(Token::Plus),
            '<' | '≤' => tokens.push(Token::Less),
            '>' | '≥' => tokens.push(Token::Greater),
            _ => {}
        }
        index += 1;
    }
    tokens
}

fn is_apostrophe(c: char) -> bool {
    c == '\'' || c == '’'
}

/// The forms a word may have in the singular, the word itself first:
/// `comedies` → `comedies, comedie, comedi, comedy`; `thrillers` → `thrillers, thriller`.
pub fn singular_forms(word: &str) -> Vec<String> {
    let mut forms = vec![word.to_owned()];
    if word.len() > 3 && !word.ends_with("ss") {
        if let Some(stem) = word.strip_suffix('s') {
            forms.push(stem.to_owned());
        }
        if let Some(stem) = word.strip_suffix("es") {
            forms.push(stem.to_owned());
        }
        if let Some(stem) = word.strip_suffix("ies") {
            forms.push(format!("{stem}y"));
        }
    }
    forms
}

/// English function words and chat filler that say nothing about what is wanted.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "afford",
    "again",
    "all",
    "am",
    "an",
    "and",
    "any",
    "anything",
    "are",
    "as",
    "at",
    "be",
    "because",
    "best",
    "but",
    "by",
    "can",
    "could",
    "do",
    "does",
    "either",
    "else",
    "find",
    "for",
    "from",
    "get",
    "give",
    "good",
    "got",
    "great",
    "have",
    "having",
    "hello",
    "help",
    "hey",
    "hi",
    "how",
    "i",
    "id",
    "if",
    "im",
    "in",
    "into",
    "is",
    "it",
    "its",
    "just",
    "kind",
    "kinds",
    "let",
    "like",
    "looking",
    "lot",
    "lots",
    "maybe",
    "me",
    "mine",
    "more",
    "most",
    "my",
    "need",
    "new",
    "nice",
    "no",
    "not",
    "now",
    "of",
    "on",
    "one",
    "ones",
    "only",
    "or",
    "other",
    "others",
    "our",
    "please",
    "pls",
    "prefer",
    "preferably",
    "rather",
    "really",
    "recommend",
    "recommendation",
    "recommendations",
    "search",
    "see",
    "show",
    "similar",
    "so",
    "some",
    "something",
    "somewhat",
    "sort",
    "stuff",
    "suggest",
    "suggestion",
    "suggestions",
    "than",
    "thank",
    "thanks",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "thing",
    "things",
    "this",
    "those",
    "to",
    "too",
    "try",
    "us",
    "very",
    "want",
    "wanted",
    "was",
    "we",
    "what",
    "whats",
    "which",
    "while",
    "who",
    "will",
    "with",
    "within",
    "would",
    "you",
    "your",
    // Generic nouns of a catalog: they name no particular item.
    "item",
    "items",
    "product",
    "products",
    "option",
    "options",
    "movie",
    "movies",
    "film",
    "films",
    "title",
    "titles",
    "pick",
    "picks",
    "choice",
    "choices",
    "offer",
    "offers",
    "idea",
    "ideas",
];

/// Whether a lowercased word carries no search meaning.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A number that starts with a point used to stop the tokenizer from advancing: a
    /// chat message ".5" spun a runtime thread forever (found by schema fuzzing).
    #[test]
    fn a_leading_point_starts_a_number() {
        assert_eq!(tokenize(".5"), vec![Token::Number(0.5)]);
        assert_eq!(
            tokenize("under .75 or ..5 x.5"),
            vec![
                Token::Word("under".into()),
                Token::Number(0.75),
                Token::Word("or".into()),
                Token::Number(0.5),
                Token::Word("x".into()),
                Token::Number(0.5),
            ]
        );
        assert_eq!(tokenize(".5.5"), vec![]);
    }

    #[test]
    fn tokenizes_prices_words_and_symbols() {
        assert_eq!(
            tokenize("Comedies under $12.50, or 1,000€? Sci-Fi 18+ children's"),
            vec![
                Token::Word("comedies".into()),
                Token::Word("under".into()),
                Token::Currency('$'),
                Token::Number(12.5),
                Token::Word("or".into()),
                Token::Number(1000.0),
                Token::Currency('€'),
                Token::Word("sci".into()),
                Token::Dash,
                Token::Word("fi".into()),
                Token::Number(18.0),
                Token::Plus,
                Token::Word("children".into()),
            ]
        );
        assert_eq!(
            tokenize("$10-$20 <30"),
            vec![
                Token::Currency('$'),
                Token::Number(10.0),
                Token::Dash,
                Token::Currency('$'),
                Token::Number(20.0),
                Token::Less,
                Token::Number(30.0),
            ]
        );
        assert_eq!(tokenize("Amélie"), vec![Token::Word("amélie".into())]);
        assert!(tokenize("?!...").is_empty());
    }

    #[test]
    fn singular_forms_cover_regular_plurals() {
        assert!(singular_forms("comedies").contains(&"comedy".to_owned()));
        assert!(singular_forms("thrillers").contains(&"thriller".to_owned()));
        assert!(singular_forms("movies").contains(&"movie".to_owned()));
        assert!(singular_forms("boxes").contains(&"box".to_owned()));
        assert_eq!(singular_forms("class"), vec!["class".to_owned()]);
        assert_eq!(singular_forms("bus"), vec!["bus".to_owned()]);
    }

    #[test]
    fn stopwords() {
        assert!(is_stopword("something"));
        assert!(is_stopword("movies"));
        assert!(!is_stopword("love"));
    }
}
