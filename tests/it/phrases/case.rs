//! Cases and turns, and the builders the case tables are written with:
//!
//! ```text
//! ask("cheap comedies", want().groups(&["Comedy"]).cheap())
//! script("paging", [ask("dramas", want().groups(&["Drama"])), ask("more", same()).unseen()])
//! ```

use super::want::{Position, Want};

/// What the answer to a turn must be, besides its constraints.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    /// Every item satisfies the expected constraints; some item does when a catalog item does.
    Matching,
    /// [`Answer::Matching`], and no item shown earlier in the conversation.
    Unseen,
    /// No item matches: no items, and the reply says "I found no ..." and how many
    /// items relaxing the price would match.
    NothingUnlessPriceRelaxed,
    /// Only the item at this position of the previous answer, and a reply to the question.
    About(Position, Question),
}

/// A question about one item.
#[derive(Debug, Clone, Copy)]
pub enum Question {
    /// "... is available." / "... is not available." / "I don't know whether ... is available."
    Availability,
    /// "... costs 12.99 USD."
    Price,
}

/// One message and what must come back.
#[derive(Debug, Clone)]
pub struct Turn {
    pub message: &'static str,
    pub want: Want,
    pub answer: Answer,
    /// Texts the reply must contain.
    pub says: Vec<&'static str>,
}

/// One conversation: a single message or a multi-turn script.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub turns: Vec<Turn>,
}

/// A message whose answer must match `want`.
pub fn ask(message: &'static str, want: Want) -> Turn {
    Turn {
        message,
        want,
        answer: Answer::Matching,
        says: Vec::new(),
    }
}

/// A multi-turn conversation.
pub fn script(name: &str, turns: impl IntoIterator<Item = Turn>) -> Case {
    Case {
        name: name.to_owned(),
        turns: turns.into_iter().collect(),
    }
}

impl Turn {
    /// Nothing shown earlier in the conversation comes back.
    pub fn unseen(mut self) -> Turn {
        self.answer = Answer::Unseen;
        self
    }

    /// Answers `question` about the item at `position` of the previous answer.
    pub fn about(mut self, position: Position, question: Question) -> Turn {
        self.answer = Answer::About(position, question);
        self
    }

    /// Nothing matches; the reply says how many items relaxing the price would give.
    pub fn finds_nothing(mut self) -> Turn {
        self.answer = Answer::NothingUnlessPriceRelaxed;
        self
    }

    /// The reply contains `text`.
    pub fn says(mut self, text: &'static str) -> Turn {
        self.says.push(text);
        self
    }
}

/// A single message is a case named by its message.
impl From<Turn> for Case {
    fn from(turn: Turn) -> Case {
        Case {
            name: turn.message.to_owned(),
            turns: vec![turn],
        }
    }
}

/// Single messages first, then the scripts.
pub fn cases(single: Vec<Turn>, scripts: Vec<Case>) -> Vec<Case> {
    single.into_iter().map(Case::from).chain(scripts).collect()
}
