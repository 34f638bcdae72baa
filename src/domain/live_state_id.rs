//! Which live state something is about: a session's (by sid) or a user's (by uid).

/// Which live state a request is about.
#[derive(Debug, Clone)]
pub enum LiveStateId {
    Session(String),
    User(String),
}

/// Whether a live state is a session's or a user's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    Session,
    User,
}

impl LiveStateId {
    /// The sid or uid: the session's or user's routing key.
    pub fn id(&self) -> &str {
        match self {
            LiveStateId::Session(sid) => sid,
            LiveStateId::User(uid) => uid,
        }
    }

    pub fn kind(&self) -> StateKind {
        match self {
            LiveStateId::Session(_) => StateKind::Session,
            LiveStateId::User(_) => StateKind::User,
        }
    }
}
