//! The category and tag names of the indexed items, kept up to date by the indexer,
//! so that other modules (chat) can recognize them in free text.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use super::schema::{GROUP_FIELDS, TAG_FIELDS};

/// The distinct group (category, genre) and tag values of the indexed items:
/// lowercased value → the form it was first seen in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CatalogLabels {
    /// Group (category, genre) values: lowercased → the form first seen.
    pub groups: BTreeMap<String, String>,
    /// Tag values: lowercased → the form first seen.
    pub tags: BTreeMap<String, String>,
}

/// Which list a value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabelKind {
    Group,
    Tag,
}

/// The labels of a row, each with its kind.
pub fn labels(row: &Map<String, Value>) -> Vec<(LabelKind, String)> {
    let mut labels = Vec::new();
    for (fields, kind) in [(&GROUP_FIELDS[..], LabelKind::Group), (&TAG_FIELDS[..], LabelKind::Tag)] {
        for field in fields {
            let values: Vec<&str> = match row.get(*field) {
                Some(Value::String(value)) => vec![value.as_str()],
                Some(Value::Array(values)) => values.iter().filter_map(Value::as_str).collect(),
                _ => continue,
            };
            labels.extend(
                values
                    .into_iter()
                    .map(str::trim)
                    .filter(|value| !value.is_empty())
                    .map(|value| (kind, value.to_owned())),
            );
        }
    }
    labels
}

/// Reference counts of every label over the indexed items, so that a label goes
/// away with the last item carrying it.
#[derive(Debug, Default)]
pub struct LabelCounts {
    /// Item key → its labels (kind, lowercased).
    items: HashMap<String, Vec<(LabelKind, String)>>,
    /// (kind, lowercased) → (display form, items carrying it).
    counts: HashMap<(LabelKind, String), (String, usize)>,
    /// Whether anything changed since the last snapshot.
    changed: bool,
}

impl LabelCounts {
    /// Records the labels of item `key`, replacing what it had.
    pub fn set(&mut self, key: &str, labels: Vec<(LabelKind, String)>) {
        self.remove(key);
        let mut lowered: Vec<(LabelKind, String)> = Vec::with_capacity(labels.len());
        for (kind, display) in labels {
            let lower = display.to_lowercase();
            if lowered.contains(&(kind, lower.clone())) {
                continue;
            }
            let entry = self.counts.entry((kind, lower.clone())).or_insert_with(|| {
                self.changed = true;
                (display, 0)
            });
            entry.1 += 1;
            lowered.push((kind, lower));
        }
        if !lowered.is_empty() {
            self.items.insert(key.to_owned(), lowered);
        }
    }

    /// Forgets the labels of item `key`.
    pub fn remove(&mut self, key: &str) {
        let Some(labels) = self.items.remove(key) else {
            return;
        };
        for label in labels {
            if let Some(entry) = self.counts.get_mut(&label) {
                entry.1 -= 1;
                if entry.1 == 0 {
                    self.counts.remove(&label);
                    self.changed = true;
                }
            }
        }
    }

    /// Forgets every item whose key starts with `prefix` (a dropped table).
    pub fn remove_prefix(&mut self, prefix: &str) {
        let keys: Vec<String> = self
            .items
            .keys()
            .filter(|key| key.starts_with(prefix))
            .cloned()
            .collect();
        for key in keys {
            self.remove(&key);
        }
    }

    /// A new snapshot when something changed since the last one.
    pub fn snapshot_if_changed(&mut self) -> Option<CatalogLabels> {
        if !std::mem::take(&mut self.changed) {
            return None;
        }
        let mut snapshot = CatalogLabels::default();
        for ((kind, lower), (display, _)) in &self.counts {
            let list = match kind {
                LabelKind::Group => &mut snapshot.groups,
                LabelKind::Tag => &mut snapshot.tags,
            };
            list.insert(lower.clone(), display.clone());
        }
        Some(snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn labels_come_from_groups_genres_and_tags() {
        let labels = labels(&row(
            json!({"groups": ["Comedy", " "], "genres": "Drama", "tags": ["Pixar"]}),
        ));
        assert_eq!(
            labels,
            [
                (LabelKind::Group, "Comedy".to_owned()),
                (LabelKind::Group, "Drama".to_owned()),
                (LabelKind::Tag, "Pixar".to_owned())
            ]
        );
    }

    #[test]
    fn a_label_lives_as_long_as_an_item_carries_it() {
        let mut counts = LabelCounts::default();
        counts.set("t\0a", labels(&row(json!({"groups": ["Comedy", "Drama"]}))));
        counts.set("t\0b", labels(&row(json!({"groups": ["comedy"], "tags": ["funny"]}))));
        let snapshot = counts.snapshot_if_changed().unwrap();
        assert_eq!(snapshot.groups.get("comedy").map(String::as_str), Some("Comedy"));
        assert_eq!(snapshot.tags.get("funny").map(String::as_str), Some("funny"));
        assert_eq!(counts.snapshot_if_changed(), None, "nothing changed");
        counts.remove("t\0a");
        let snapshot = counts.snapshot_if_changed().unwrap();
        assert!(snapshot.groups.contains_key("comedy"), "b still carries it");
        assert!(!snapshot.groups.contains_key("drama"));
        counts.set("t\0b", Vec::new());
        counts.remove_prefix("t\0");
        assert_eq!(counts.snapshot_if_changed().unwrap(), CatalogLabels::default());
    }
}
