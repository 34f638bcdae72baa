//! The catalog's labels as chat reads them: [`LabelDictionary`] indexes the
//! group/category names and tags of indexed items by the words a message may use
//! for them, with plural/singular tolerance (`comedies` → Comedy), adjectives
//! (`romantic` → Romance) and multiword names (`sci-fi`, `sci fi`, `scifi` → Sci-Fi).

use std::collections::HashMap;

use super::text::{is_stopword, singular_forms};

/// What a catalog word names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A group (category, genre) name.
    Group,
    /// A tag.
    Tag,
}

/// One label of the dictionary as the catalog spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DictionaryEntry {
    /// The label as the catalog spells it (`Sci-Fi`).
    pub display: String,
    /// Whether it names a group or a tag.
    pub kind: EntryKind,
}

/// Words people use for a group the catalog names otherwise ("cartoons" for
/// Animation, "scary" for Horror); one applies only when the catalog has the group
/// it points to (spelled as the catalog spells it, any case or dash).
const SYNONYMS: &[(&str, &str)] = &[
    ("romantic", "romance"),
    ("love story", "romance"),
    ("love stories", "romance"),
    ("animated", "animation"),
    ("cartoon", "animation"),
    ("cartoons", "animation"),
    ("anime", "animation"),
    ("funny", "comedy"),
    ("hilarious", "comedy"),
    ("humorous", "comedy"),
    ("comic", "comedy"),
    ("laughs", "comedy"),
    ("scary", "horror"),
    ("spooky", "horror"),
    ("creepy", "horror"),
    ("frightening", "horror"),
    ("terrifying", "horror"),
    ("space", "sci fi"),
    ("science fiction", "sci fi"),
    ("futuristic", "sci fi"),
    ("aliens", "sci fi"),
    ("alien", "sci fi"),
    ("robots", "sci fi"),
    ("detective", "mystery"),
    ("detectives", "mystery"),
    ("whodunit", "mystery"),
    ("whodunits", "mystery"),
    ("mysterious", "mystery"),
    ("cowboy", "western"),
    ("cowboys", "western"),
    ("musical", "musical"),
    ("singing", "musical"),
    ("documentary", "documentary"),
    ("docs", "documentary"),
    ("historical", "history"),
    ("thrilling", "thriller"),
    ("suspense", "thriller"),
    ("suspenseful", "thriller"),
    ("magic", "fantasy"),
    ("wizards", "fantasy"),
    ("dragons", "fantasy"),
    ("superhero", "action"),
    ("superheroes", "action"),
    ("martial arts", "action"),
    ("gangster", "crime"),
    ("gangsters", "crime"),
    ("heist", "crime"),
    ("war movies", "war"),
    ("military", "war"),
    ("noir", "film noir"),
];

/// Longest synonym, in words.
const SYNONYM_WORDS: usize = 2;

/// The names of the catalog's groups and tags, indexed by their normalized word
/// sequences, so that a window of message words finds the label it names.
#[derive(Debug, Default)]
pub struct LabelDictionary {
    /// Normalized word sequence (words joined by a space) → entry. Group names win
    /// over tags spelled the same.
    entries: HashMap<String, DictionaryEntry>,
    /// Longest name, in words.
    max_words: usize,
    /// Whether the catalog has a group for children (Children, Kids, Family...).
    children_groups: Vec<String>,
}

/// Group names that mark an item as suitable for children.
pub const CHILDREN_GROUP_WORDS: &[&str] = &["children", "child", "kids", "kid", "family", "families"];

impl LabelDictionary {
    /// Indexes group names and tags as the catalog spells them.
    pub fn new<G: AsRef<str>, T: AsRef<str>>(groups: &[G], tags: &[T]) -> LabelDictionary {
        let mut dictionary = LabelDictionary::default();
        for tag in tags {
            dictionary.insert(tag.as_ref(), EntryKind::Tag);
        }
        for group in groups {
            dictionary.insert(group.as_ref(), EntryKind::Group);
            let words = words_of(group.as_ref());
            if words.len() == 1 && CHILDREN_GROUP_WORDS.contains(&words[0].as_str()) {
                dictionary.children_groups.push(group.as_ref().to_owned());
            }
        }
        dictionary
    }

    fn insert(&mut self, name: &str, kind: EntryKind) {
        let words = words_of(name);
        let Some(last) = words.last() else { return };
        if words.len() == 1 && (last.len() < 3 || is_stopword(last)) {
            return;
        }
        let entry = DictionaryEntry {
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
                Some(existing) if existing.kind == EntryKind::Group && kind == EntryKind::Tag => {}
                _ => {
                    self.entries.insert(key, entry.clone());
                }
            }
        }
    }

    /// The entry named by exactly these message words, if any (the last word may be
    /// plural, or the words a synonym of a group the catalog has).
    pub fn lookup(&self, words: &[&str]) -> Option<&DictionaryEntry> {
        let (last, head) = words.split_last()?;
        let head: Vec<String> = head.iter().map(|w| (*w).to_owned()).collect();
        for form in singular_forms(last) {
            if let Some(entry) = self.entries.get(&join(&head, &form)) {
                return Some(entry);
            }
        }
        let phrase = words.join(" ");
        let (_, name) = SYNONYMS.iter().find(|(synonym, _)| *synonym == phrase)?;
        self.entries.get(*name).filter(|entry| entry.kind == EntryKind::Group)
    }

    /// The longest name (or synonym) in words: the widest window a message is matched with.
    pub fn max_words(&self) -> usize {
        self.max_words.max(SYNONYM_WORDS)
    }

    /// The entry spelled `name` (any case, dash or spacing), without plural or synonym
    /// tolerance: what an LLM named from the lists it was given.
    pub fn find(&self, name: &str) -> Option<&DictionaryEntry> {
        let words = words_of(name);
        let key = words.join(" ");
        self.entries
            .get(&key)
            .filter(|entry| words_of(&entry.display) == words)
            .or_else(|| self.entries.get(&key))
    }

    /// Every group and tag once (a group spelled like a tag stands for both), sorted.
    pub fn labels(&self) -> Vec<DictionaryEntry> {
        let mut labels: Vec<DictionaryEntry> = self.entries.values().cloned().collect();
        labels.sort_by(|a, b| (&a.display, a.kind as u8).cmp(&(&b.display, b.kind as u8)));
        labels.dedup();
        labels
    }

    /// Up to `most` group names and tag names, each list sorted, as the catalog spells them.
    pub fn names(&self, most: usize) -> (Vec<&str>, Vec<&str>) {
        let mut groups = std::collections::BTreeSet::new();
        let mut tags = std::collections::BTreeSet::new();
        for entry in self.entries.values() {
            match entry.kind {
                EntryKind::Group => groups.insert(entry.display.as_str()),
                EntryKind::Tag => tags.insert(entry.display.as_str()),
            };
        }
        (
            groups.into_iter().take(most).collect(),
            tags.into_iter().take(most).collect(),
        )
    }

    /// The catalog's groups for children, as it spells them.
    pub fn children_groups(&self) -> &[String] {
        &self.children_groups
    }

    /// Whether no group or tag name was worth indexing.
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

    fn movielens() -> LabelDictionary {
        LabelDictionary::new(
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

    fn display(dictionary: &LabelDictionary, words: &[&str]) -> Option<String> {
        dictionary.lookup(words).map(|entry| entry.display.clone())
    }

    #[test]
    fn plural_and_singular_forms_find_groups() {
        let dictionary = movielens();
        assert_eq!(display(&dictionary, &["comedies"]).as_deref(), Some("Comedy"));
        assert_eq!(display(&dictionary, &["comedy"]).as_deref(), Some("Comedy"));
        assert_eq!(display(&dictionary, &["thrillers"]).as_deref(), Some("Thriller"));
        assert_eq!(display(&dictionary, &["documentaries"]).as_deref(), Some("Documentary"));
        assert_eq!(display(&dictionary, &["imax"]).as_deref(), Some("IMAX"));
        assert_eq!(display(&dictionary, &["drama"]), None);
    }

    #[test]
    fn multiword_names_match_spaced_hyphenated_and_joined() {
        let dictionary = movielens();
        assert_eq!(dictionary.max_words(), 2);
        assert_eq!(display(&dictionary, &["sci", "fi"]).as_deref(), Some("Sci-Fi"));
        assert_eq!(display(&dictionary, &["scifi"]).as_deref(), Some("Sci-Fi"));
        assert_eq!(display(&dictionary, &["film", "noir"]).as_deref(), Some("Film-Noir"));
        assert_eq!(
            display(&dictionary, &["dark", "comedies"]).as_deref(),
            Some("dark comedy")
        );
        assert_eq!(dictionary.lookup(&["twist", "ending"]).unwrap().kind, EntryKind::Tag);
    }

    #[test]
    fn short_and_stopword_names_are_not_indexed() {
        let dictionary = movielens();
        assert_eq!(display(&dictionary, &["a"]), None);
        assert_eq!(display(&dictionary, &["love"]).as_deref(), Some("love"));
    }

    #[test]
    fn adjectives_name_groups_the_catalog_has() {
        let dictionary = movielens();
        assert_eq!(display(&dictionary, &["romantic"]).as_deref(), Some("Romance"));
        assert_eq!(display(&dictionary, &["scary"]), None, "no Horror group here");
    }

    #[test]
    fn groups_win_over_tags_and_children_groups_are_known() {
        let dictionary = LabelDictionary::new(&["Comedy", "Kids"], &["comedy"]);
        assert_eq!(dictionary.lookup(&["comedy"]).unwrap().kind, EntryKind::Group);
        assert_eq!(dictionary.children_groups(), ["Kids".to_owned()]);
        assert!(LabelDictionary::new::<&str, &str>(&[], &[]).is_empty());
    }
}
