//! The catalog's own words: the group/category names and tags of indexed items,
//! looked up by the words of a message with plural/singular tolerance
//! (`comedies` → Comedy) and multiword names (`sci-fi`, `sci fi`, `scifi` → Sci-Fi).

use std::collections::HashMap;

use super::text::{is_stopword, singular_forms};

/// What a catalog word names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VocabularyKind {
    Group,
    Tag,
}

/// One name of the vocabulary as the catalog spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VocabularyEntry {
    pub display: String,
    pub kind: VocabularyKind,
}

/// Adjectives people use for a group the catalog names with a noun; applied only
/// when the catalog has that group.
const ADJECTIVES: &[(&str, &str)] = &[
    ("romantic", "romance"),
    ("animated", "animation"),
    ("funny", "comedy"),
    ("scary", "horror"),
    ("musical", "musical"),
    ("documentary", "documentary"),
    ("historical", "history"),
    ("mysterious", "mystery"),
];

/// The names of groups and tags, indexed by their normalized word sequences.
#[derive(Debug, Default)]
pub struct Vocabulary {
    /// Normalized word sequence (words joined by a space) → entry. Group names win
    /// over tags spelled the same.
    entries: HashMap<String, VocabularyEntry>,
    /// Longest name, in words.
    max_words: usize,
    /// Whether the catalog has a group for children (Children, Kids, Family...).
    children_groups: Vec<String>,
}

/// Group names that mark an item as suitable for children.
pub const CHILDREN_GROUP_WORDS: &[&str] = &["children", "child", "kids", "kid", "family", "families"];

impl Vocabulary {
    /// Indexes group names and tags as the catalog spells them.
    pub fn new<G: AsRef<str>, T: AsRef<str>>(groups: &[G], tags: &[T]) -> Vocabulary {
        let mut vocabulary = Vocabulary::default();
        for tag in tags {
            vocabulary.insert(tag.as_ref(), VocabularyKind::Tag);
        }
        for group in groups {
            vocabulary.insert(group.as_ref(), VocabularyKind::Group);
            let words = words_of(group.as_ref());
            if words.len() == 1 && CHILDREN_GROUP_WORDS.contains(&words[0].as_str()) {
                vocabulary.children_groups.push(group.as_ref().to_owned());
            }
        }
        vocabulary
    }

    fn insert(&mut self, name: &str, kind: VocabularyKind) {
        let words = words_of(name);
        let Some(last) = words.last() else { return };
        if words.len() == 1 && (last.len() < 3 || is_stopword(last)) {
            return;
        }
        let entry = VocabularyEntry {
            display: name.trim().to_owned(),
            kind,
        };
        self.max_words = self.max_words.max(words.len());
        let head = &words[..words.len() - 1];
        let mut keys: Vec<String> = singular_forms(last).into_iter().map(|form| join(head, &form)).collect();
        if words.len() > 1 {
            keys.push(words.concat());
        }
        for key in keys {
            match self.entries.get(&key) {
                Some(existing) if existing.kind == VocabularyKind::Group && kind == VocabularyKind::Tag => {}
                _ => {
                    self.entries.insert(key, entry.clone());
                }
            }
        }
    }

    /// The entry named by exactly these message words, if any (the last word may be
    /// plural, or an adjective of a group the catalog has).
    pub fn lookup(&self, words: &[&str]) -> Option<&VocabularyEntry> {
        let (last, head) = words.split_last()?;
        let head: Vec<String> = head.iter().map(|w| (*w).to_owned()).collect();
        for form in singular_forms(last) {
            if let Some(entry) = self.entries.get(&join(&head, &form)) {
                return Some(entry);
            }
        }
        if head.is_empty() {
            let (_, noun) = ADJECTIVES.iter().find(|(adjective, _)| adjective == last)?;
            return self
                .entries
                .get(*noun)
                .filter(|entry| entry.kind == VocabularyKind::Group);
        }
        None
    }

    /// The longest name in words: the widest window a message is matched with.
    pub fn max_words(&self) -> usize {
        self.max_words
    }

    /// The catalog's groups for children, as it spells them.
    pub fn children_groups(&self) -> &[String] {
        &self.children_groups
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The lowercased alphanumeric words of a name: `Film-Noir` → `film`, `noir`.
pub fn words_of(name: &str) -> Vec<String> {
    name.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_owned)
        .collect()
}

fn join(head: &[String], last: &str) -> String {
    let mut key = head.join(" ");
    if !key.is_empty() {
        key.push(' ');
    }
    key.push_str(last);
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn movielens() -> Vocabulary {
        Vocabulary::new(
            &[
                "Comedy",
                "Thriller",
                "Sci-Fi",
                "Film-Noir",
                "Children",
                "Romance",
                "Documentary",
                "IMAX",
            ],
            &["dark comedy", "twist ending", "a", "love"],
        )
    }

    fn display(vocabulary: &Vocabulary, words: &[&str]) -> Option<String> {
        vocabulary.lookup(words).map(|entry| entry.display.clone())
    }

    #[test]
    fn plural_and_singular_forms_find_groups() {
        let vocabulary = movielens();
        assert_eq!(display(&vocabulary, &["comedies"]).as_deref(), Some("Comedy"));
        assert_eq!(display(&vocabulary, &["comedy"]).as_deref(), Some("Comedy"));
        assert_eq!(display(&vocabulary, &["thrillers"]).as_deref(), Some("Thriller"));
        assert_eq!(display(&vocabulary, &["documentaries"]).as_deref(), Some("Documentary"));
        assert_eq!(display(&vocabulary, &["imax"]).as_deref(), Some("IMAX"));
        assert_eq!(display(&vocabulary, &["drama"]), None);
    }

    #[test]
    fn multiword_names_match_spaced_hyphenated_and_joined() {
        let vocabulary = movielens();
        assert_eq!(vocabulary.max_words(), 2);
        assert_eq!(display(&vocabulary, &["sci", "fi"]).as_deref(), Some("Sci-Fi"));
        assert_eq!(display(&vocabulary, &["scifi"]).as_deref(), Some("Sci-Fi"));
        assert_eq!(display(&vocabulary, &["film", "noir"]).as_deref(), Some("Film-Noir"));
        assert_eq!(
            display(&vocabulary, &["dark", "comedies"]).as_deref(),
            Some("dark comedy")
        );
        assert_eq!(
            vocabulary.lookup(&["twist", "ending"]).unwrap().kind,
            VocabularyKind::Tag
        );
    }

    #[test]
    fn short_and_stopword_names_are_not_indexed() {
        let vocabulary = movielens();
        assert_eq!(display(&vocabulary, &["a"]), None);
        assert_eq!(display(&vocabulary, &["love"]).as_deref(), Some("love"));
    }

    #[test]
    fn adjectives_name_groups_the_catalog_has() {
        let vocabulary = movielens();
        assert_eq!(display(&vocabulary, &["romantic"]).as_deref(), Some("Romance"));
        assert_eq!(display(&vocabulary, &["scary"]), None, "no Horror group here");
    }

    #[test]
    fn groups_win_over_tags_and_children_groups_are_known() {
        let vocabulary = Vocabulary::new(&["Comedy", "Kids"], &["comedy"]);
        assert_eq!(vocabulary.lookup(&["comedy"]).unwrap().kind, VocabularyKind::Group);
        assert_eq!(vocabulary.children_groups(), ["Kids".to_owned()]);
        assert!(Vocabulary::new::<&str, &str>(&[], &[]).is_empty());
    }
}
