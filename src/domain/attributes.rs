//! Affinity attribute keys (`group:…`, `tag:…`, `price_band:…`) interned as small
//! numbers for the ranking loop, which looks up every attribute of every candidate:
//! comparing numbers there instead of strings spares a cache miss per key. Live
//! states keep their affinities by number too (four bytes instead of a string
//! each, in every live session and user), and name them again when stored or shown.
//!
//! Catalog field names are interned here too (`field:…`), for the business rules,
//! which look up fields of every candidate.
//!
//! The table is process-wide and only grows; it holds one entry per distinct
//! attribute value the catalog and the events have shown (a vocabulary, not a count
//! of items).

use std::sync::OnceLock;

use dashmap::DashMap;
use parking_lot::RwLock;
use rustc_hash::FxBuildHasher;

/// The number an attribute key is known by in this process.
pub type AttributeId = u32;

struct Table {
    ids: DashMap<&'static str, AttributeId, FxBuildHasher>,
    /// By id. Names live as long as the process, as the table does.
    names: RwLock<Vec<&'static str>>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table {
        ids: DashMap::default(),
        names: RwLock::new(Vec::new()),
    })
}

/// The id of `key`, the same for the same key for the life of the process.
pub fn intern(key: &str) -> AttributeId {
    let table = table();
    if let Some(id) = table.ids.get(key) {
        return *id;
    }
    // New keys are rare (a vocabulary): one at a time under the write lock.
    let mut names = table.names.write();
    if let Some(id) = table.ids.get(key) {
        return *id;
    }
    let name: &'static str = Box::leak(key.into());
    let id = names.len() as AttributeId;
    names.push(name);
    table.ids.insert(name, id);
    id
}

/// The id of `key` if it was ever interned: a lookup that never grows the table (for
/// names a request brings, which may be anything).
pub fn interned(key: &str) -> Option<AttributeId> {
    table().ids.get(key).map(|id| *id)
}

/// The key `id` was interned for ("" for a number [`intern`] never gave).
pub fn name(id: AttributeId) -> &'static str {
    table().names.read().get(id as usize).copied().unwrap_or_default()
}

/// The key a catalog field's name is interned under (beside the attribute keys).
pub fn field_key(name: &str) -> String {
    format!("field:{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_key_gets_the_same_id_and_others_another() {
        let shoes = intern("group:test-shoes");
        assert_eq!(intern("group:test-shoes"), shoes);
        assert_ne!(intern("group:test-hats"), shoes);
        assert_eq!(
            (name(shoes), name(intern("group:test-hats"))),
            ("group:test-shoes", "group:test-hats")
        );
        assert_eq!(interned("group:test-never"), None);
    }
}
