//! Chat, the pure part: what a message asks for and what the answer says. No I/O.
//!
//! - [`text`]: tokens of a message, plural forms, stopwords.
//! - [`catalog`]: every item as chat filters it, and the catalog's price and year scale.
//! - [`dictionary`]: the catalog's group names and tags, looked up by message words.
//! - [`constraints`]: extraction of constraints from one message and their merge
//!   across turns (the rules are tabled there).
//! - [`meaning`]: words the dictionary does not know, read by an embedding model.
//! - [`filter`]: which catalog rows satisfy the constraints, check by check.
//! - [`reply`]: the reply text composed from what a turn found.
//!
//! The conversation state lives in `engine::conversation` (one actor per
//! conversation); the endpoint that runs a turn is `api::chat`.

pub mod catalog;
pub mod constraints;
pub mod dictionary;
pub mod filter;
pub mod meaning;
pub mod reply;
pub mod text;
