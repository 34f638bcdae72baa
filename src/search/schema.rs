//! The index schema, the text analyzer, and how a catalog row becomes a document:
//! which of its fields are the title, the labels (groups, genres, tags) and the body.

use serde_json::{Map, Value};
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, STORED, STRING};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, TextAnalyzer, TokenStream,
};
use tantivy::{Index, TantivyDocument};

/// Name the analyzer is registered under on the index.
pub const ANALYZER: &str = "rankstream_text";
/// Name of the stemming analyzer (English) of the stemmed copies of the text fields.
pub const STEM_ANALYZER: &str = "rankstream_stem";
/// Tokens longer than this (in bytes) are not indexed.
const LONGEST_TOKEN: usize = 40;
/// Separates table and id in the unique key of a document.
pub const KEY_SEPARATOR: char = '\u{0}';

/// Fields holding the title, in order of preference.
pub const TITLE_FIELDS: [&str; 2] = ["title", "name"];
/// Fields holding group (category) labels.
pub const GROUP_FIELDS: [&str; 4] = ["groups", "genres", "group", "category"];
/// Fields holding tags.
pub const TAG_FIELDS: [&str; 2] = ["tags", "promo_tags"];
/// Fields that never hold searchable text: reserved catalog fields and links.
const NOT_TEXT: [&str; 8] = [
    "id",
    "_table",
    "created_at",
    "updated_at",
    "is_deleted",
    "imageUrl",
    "image_url",
    "image",
];

/// The fields of the index.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    /// `table \0 id`: unique per item, stored; deletes go by it.
    pub key: Field,
    /// The item's table, for dropping a whole table.
    pub table: Field,
    /// The item's id, for scoring given ids (rerank).
    pub id: Field,
    pub title: Field,
    pub labels: Field,
    pub body: Field,
    /// The same three, stemmed: "comedies" finds "comedy" there, while the unstemmed
    /// fields keep typo tolerance (a misspelt word does not stem like the word).
    pub title_stem: Field,
    pub labels_stem: Field,
    pub body_stem: Field,
    /// Each group and tag value of the item, lowercased, whole: a query that names one
    /// matches the items in it.
    pub label: Field,
    /// [`item_hash`] of the item's id (fast): its prior, looked up while collecting.
    pub item: Field,
    /// How many words the title has (fast): of two titles that cover a query alike,
    /// the one with fewer other words is the closer match.
    pub title_words: Field,
}

impl Fields {
    pub fn schema() -> Schema {
        let mut builder = Schema::builder();
        builder.add_text_field("key", STRING | STORED);
        builder.add_text_field("table", STRING);
        builder.add_text_field("id", STRING);
        let analyzed_by = |analyzer: &str| {
            TextOptions::default().set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer(analyzer)
                    .set_index_option(IndexRecordOption::WithFreqs),
            )
        };
        for (name, analyzer) in [
            ("title", ANALYZER),
            ("labels", ANALYZER),
            ("body", ANALYZER),
            ("title_stem", STEM_ANALYZER),
            ("labels_stem", STEM_ANALYZER),
            ("body_stem", STEM_ANALYZER),
        ] {
            builder.add_text_field(name, analyzed_by(analyzer));
        }
        builder.add_text_field("label", STRING);
        builder.add_u64_field("item", FAST);
        builder.add_u64_field("title_words", FAST);
        builder.build()
    }

    /// The fields of `schema`; `None` when it is not this module's schema.
    pub fn of(schema: &Schema) -> Option<Fields> {
        let field = |name: &str| schema.get_field(name).ok();
        let fields = Fields {
            key: field("key")?,
            table: field("table")?,
            id: field("id")?,
            title: field("title")?,
            labels: field("labels")?,
            body: field("body")?,
            title_stem: field("title_stem")?,
            labels_stem: field("labels_stem")?,
            body_stem: field("body_stem")?,
            label: field("label")?,
            item: field("item")?,
            title_words: field("title_words")?,
        };
        (*schema == Fields::schema()).then_some(fields)
    }
}

/// The analyzer of the text fields and of queries: words, lowercased, accents
/// folded. Not stemmed: a misspelt word does not stem like the word it misspells
/// ("stroy" stays, "story" becomes "stori"), so typo tolerance works on these.
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(LONGEST_TOKEN))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build()
}

/// [`analyzer`] and then English stems, for the stemmed copies of the text fields.
pub fn stem_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(LONGEST_TOKEN))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(Stemmer::new(Language::English))
        .build()
}

/// Registers the analyzers on an opened or created index (they are not persisted).
pub fn register_analyzer(index: &Index) {
    index.tokenizers().register(ANALYZER, analyzer());
    index.tokenizers().register(STEM_ANALYZER, stem_analyzer());
}

/// The hash of an item id the index keeps as a fast field (ids of different tables
/// share it, as they share popularity).
pub fn item_hash(id: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(id.as_bytes())
}

/// The unique key of an item.
pub fn item_key(table: &str, id: &str) -> String {
    format!("{table}{KEY_SEPARATOR}{id}")
}

/// `(table, id)` of a key.
pub fn split_key(key: &str) -> Option<(&str, &str)> {
    key.split_once(KEY_SEPARATOR)
}

/// The searchable text of a row, by field.
#[derive(Debug, Default, PartialEq)]
pub struct ItemText {
    pub title: Vec<String>,
    pub labels: Vec<String>,
    pub body: Vec<String>,
}

/// The strings of a value: itself, or the strings of an array.
fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(text) => vec![text.as_str()],
        Value::Array(values) => values.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Links are not text anyone searches for.
fn is_link(text: &str) -> bool {
    text.starts_with("http://") || text.starts_with("https://") || text.starts_with("data:")
}

/// Splits a row's string fields into title, labels and body.
pub fn item_text(row: &Map<String, Value>) -> ItemText {
    let mut text = ItemText::default();
    for (name, value) in row {
        let name = name.as_str();
        if NOT_TEXT.contains(&name) {
            continue;
        }
        let values = strings(value)
            .into_iter()
            .filter(|t| !t.trim().is_empty() && !is_link(t));
        let target = if TITLE_FIELDS.contains(&name) {
            &mut text.title
        } else if GROUP_FIELDS.contains(&name) || TAG_FIELDS.contains(&name) {
            &mut text.labels
        } else {
            &mut text.body
        };
        target.extend(values.map(str::to_owned));
    }
    text
}

/// The document of a stored row.
pub fn document(fields: &Fields, table: &str, id: &str, row: &Map<String, Value>) -> TantivyDocument {
    let mut document = TantivyDocument::default();
    document.add_text(fields.key, item_key(table, id));
    document.add_text(fields.table, table);
    document.add_text(fields.id, id);
    document.add_u64(fields.item, item_hash(id));
    let text = item_text(row);
    let mut analyzer = analyzer();
    let mut words = 0;
    for title in &text.title {
        let mut stream = analyzer.token_stream(title);
        while stream.advance() {
            words += 1;
        }
    }
    document.add_u64(fields.title_words, words);
    for (field, stemmed, values) in [
        (fields.title, fields.title_stem, text.title),
        (fields.labels, fields.labels_stem, text.labels),
        (fields.body, fields.body_stem, text.body),
    ] {
        for value in values {
            document.add_text(stemmed, &value);
            document.add_text(field, value);
        }
    }
    for (_, label) in super::labels::labels(row) {
        document.add_text(fields.label, label.to_lowercase());
    }
    document
}

/// Whether a stored row is soft-deleted.
pub fn is_deleted(row: &Map<String, Value>) -> bool {
    row.get("is_deleted") == Some(&Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_row_splits_into_title_labels_and_body() {
        let row = json!({
            "id": "m1", "_table": "movies", "name": "Toy Story (1995)", "groups": ["Animation", "Comedy"],
            "tags": ["pixar"], "description": "Toys come alive.", "url": "https://example.com/m1",
            "imageUrl": "https://example.com/m1.jpg", "price": 3, "created_at": "2026-01-01T00:00:00.000Z",
            "language": "en"
        });
        let text = item_text(row.as_object().unwrap());
        assert_eq!(text.title, ["Toy Story (1995)"]);
        assert_eq!(text.labels, ["Animation", "Comedy", "pixar"]);
        assert_eq!(text.body, ["Toys come alive.", "en"]);
    }

    #[test]
    fn keys_round_trip() {
        let key = item_key("movies", "a b");
        assert_eq!(split_key(&key), Some(("movies", "a b")));
    }

    #[test]
    fn the_analyzer_folds_case_and_accents() {
        use tantivy::tokenizer::TokenStream;
        let mut analyzer = analyzer();
        let mut stream = analyzer.token_stream("Amélie's Comedies");
        let mut tokens = Vec::new();
        while stream.advance() {
            tokens.push(stream.token().text.clone());
        }
        assert_eq!(tokens, ["amelie", "s", "comedies"]);
    }
}
