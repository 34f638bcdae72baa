//! Constraint extraction by an LLM with structured output: the JSON schema its
//! answer must follow, the instructions (with the catalog's own group and tag
//! names), and the reading of its answer into an [`Extracted`], keeping only what
//! the catalog can check (names it has, finite non-negative prices, known
//! languages). Anything else in the answer is dropped; an answer that is not the
//! schema's object is `None`, and the rule extractor is used instead.

use serde_json::{json, Value};

use super::words::language_of;
use super::{Ask, Audience, Extracted, PriceBound, PriceLimit, Reference, RelativePrice, Similar, YearRange};
use crate::chat::dictionary::{EntryKind, LabelDictionary};

/// Names of the catalog listed in the instructions, at most, per kind.
const LISTED_NAMES: usize = 300;

/// The JSON schema of the answer (every key required; `null` or `[]` for none).
pub fn schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let number = json!({"type": ["number", "null"]});
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": [
            "groups", "excluded_groups", "tags", "excluded_tags", "min_price", "max_price", "cheaper",
            "pricier", "audience", "language", "year_from", "year_to", "terms", "reference", "ask", "more",
            "like_title", "like_reference", "reset"
        ],
        "properties": {
            "groups": strings, "excluded_groups": strings, "tags": strings, "excluded_tags": strings,
            "min_price": number, "max_price": number,
            "cheaper": {"type": "boolean"}, "pricier": {"type": "boolean"},
            "audience": {"type": ["string", "null"], "enum": ["kids", "adults", null]},
            "language": {"type": ["string", "null"]},
            "year_from": {"type": ["integer", "null"]}, "year_to": {"type": ["integer", "null"]},
            "terms": strings,
            "reference": {"type": ["integer", "null"]},
            "ask": {"type": ["string", "null"], "enum": ["availability", "price", null]},
            "more": {"type": "boolean"},
            "like_title": {"type": ["string", "null"]},
            "like_reference": {"type": ["integer", "null"]},
            "reset": {"type": "boolean"}
        }
    })
}

/// The instructions: what each key means, and the catalog's names to choose from.
pub fn instructions(dictionary: &LabelDictionary, shown_titles: &[String]) -> String {
    let (groups, tags) = dictionary.names(LISTED_NAMES);
    let mut text = String::from(
        "Read the shopper's message to a catalog's assistant and answer only with the JSON object of the \
         schema. groups/tags: categories and tags the shopper wants, spelled exactly as in the lists below \
         (map words by meaning: \"cartoons\" -> Animation); excluded_groups/excluded_tags: those ruled out \
         (\"no horror\"); min_price/max_price: amounts; cheaper/pricier: relative to the last answer; \
         audience: kids or adults; language: a language name; year_from/year_to: release years; terms: \
         other words to search titles and descriptions for; reference: the 1-based position of an item of \
         the last answer the message asks about, with ask (availability or price); more: the shopper wants \
         more results; like_title: a title the results should be similar to; like_reference: the 1-based \
         position of a shown item they should be similar to; reset: start over. Use null, [] or false for \
         anything the message does not say.\n",
    );
    text.push_str(&format!("Groups: {}\n", groups.join(", ")));
    text.push_str(&format!("Tags: {}\n", tags.join(", ")));
    if !shown_titles.is_empty() {
        text.push_str("Last answer:\n");
        for (position, title) in shown_titles.iter().enumerate() {
            text.push_str(&format!("{}. {title}\n", position + 1));
        }
    }
    text
}

/// What the answer says, kept to what the catalog can check; `None` when the answer
/// is not an object.
pub fn read_answer(answer: &Value, dictionary: &LabelDictionary) -> Option<Extracted> {
    let object = answer.as_object()?;
    let names = |key: &str, kind: EntryKind| -> Vec<String> {
        let mut found: Vec<String> = Vec::new();
        for name in object.get(key).and_then(Value::as_array).into_iter().flatten() {
            let Some(entry) = name.as_str().and_then(|name| dictionary.find(name)) else {
                continue;
            };
            if entry.kind == kind && !found.contains(&entry.display) {
                found.push(entry.display.clone());
            }
        }
        found
    };
    let amount = |key: &str| {
        object
            .get(key)
            .and_then(Value::as_f64)
            .filter(|amount| amount.is_finite() && *amount >= 0.0)
    };
    let flag = |key: &str| object.get(key).and_then(Value::as_bool).unwrap_or(false);
    let text = |key: &str| {
        object
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
    };
    let position = |key: &str| {
        object
            .get(key)
            .and_then(Value::as_u64)
            .filter(|position| (1..=100).contains(position))
            .map(|position| Reference::Position(position as usize - 1))
    };
    let year = |key: &str| object.get(key).and_then(Value::as_i64).map(|year| year as i32);
    let price = match (amount("min_price"), amount("max_price")) {
        (Some(low), Some(high)) => Some(PriceBound::Range(low.min(high), low.max(high))),
        (Some(low), None) => Some(PriceBound::Floor(PriceLimit {
            amount: low,
            inclusive: true,
        })),
        (None, Some(high)) => Some(PriceBound::Ceiling(PriceLimit {
            amount: high,
            inclusive: true,
        })),
        (None, None) => None,
    };
    let years = match (year("year_from"), year("year_to")) {
        (None, None) => None,
        (from, to) => Some(YearRange { from, to }),
    };
    let similar = match (position("like_reference"), text("like_title")) {
        (Some(reference), _) => Some(Similar::Reference(reference)),
        (None, Some(title)) => Some(Similar::Title(
            crate::chat::dictionary::words_of(title).into_iter().collect(),
        )),
        (None, None) => None,
    };
    let terms = object
        .get("terms")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .flat_map(crate::chat::dictionary::words_of)
        .collect();
    Some(Extracted {
        reset: flag("reset"),
        price,
        relative: match (flag("cheaper"), flag("pricier")) {
            (true, false) => Some(RelativePrice::Cheaper),
            (false, true) => Some(RelativePrice::Pricier),
            _ => None,
        },
        groups: names("groups", EntryKind::Group),
        tags: names("tags", EntryKind::Tag),
        excluded_groups: names("excluded_groups", EntryKind::Group),
        excluded_tags: names("excluded_tags", EntryKind::Tag),
        language: text("language").and_then(language_of),
        audience: match text("audience") {
            Some("kids") => Some(Audience::Kids),
            Some("adults") => Some(Audience::Adults),
            _ => None,
        },
        years,
        reference: position("reference"),
        ask: match text("ask") {
            Some("availability") => Some(Ask::Availability),
            Some("price") => Some(Ask::Price),
            _ => None,
        },
        more: flag("more"),
        similar,
        terms,
        ..Extracted::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dictionary() -> LabelDictionary {
        LabelDictionary::new(&["Comedy", "Animation", "Horror"], &["dark comedy"])
    }

    #[test]
    fn an_answer_is_kept_to_what_the_catalog_has() {
        let answer = json!({
            "groups": ["animation", "Westerns"], "excluded_groups": ["Horror"], "tags": ["Dark Comedy"],
            "excluded_tags": [], "min_price": null, "max_price": 10, "cheaper": false, "pricier": false,
            "audience": "kids", "language": "French", "year_from": 1990, "year_to": 1999,
            "terms": ["grandma laughs"], "reference": null, "ask": null, "more": false,
            "like_title": "Toy Story", "like_reference": null, "reset": false
        });
        let extracted = read_answer(&answer, &dictionary()).expect("an object");
        assert_eq!(
            extracted.groups,
            vec!["Animation".to_owned()],
            "unknown names are dropped"
        );
        assert_eq!(extracted.excluded_groups, vec!["Horror".to_owned()]);
        assert_eq!(extracted.tags, vec!["dark comedy".to_owned()]);
        assert_eq!(
            extracted.price,
            Some(PriceBound::Ceiling(PriceLimit {
                amount: 10.0,
                inclusive: true
            }))
        );
        assert_eq!(extracted.audience, Some(Audience::Kids));
        assert_eq!(extracted.language.map(|language| language.code), Some("fr".to_owned()));
        assert_eq!(
            extracted.years,
            Some(YearRange {
                from: Some(1990),
                to: Some(1999)
            })
        );
        assert_eq!(extracted.terms, vec!["grandma".to_owned(), "laughs".to_owned()]);
        assert_eq!(
            extracted.similar,
            Some(Similar::Title(vec!["toy".into(), "story".into()]))
        );
        assert_eq!(read_answer(&json!(["not", "an", "object"]), &dictionary()), None);
        let question = read_answer(&json!({"reference": 2, "ask": "price"}), &dictionary()).unwrap();
        assert_eq!(
            (question.reference, question.ask),
            (Some(Reference::Position(1)), Some(Ask::Price))
        );
    }

    #[test]
    fn the_instructions_list_the_catalogs_names() {
        let text = instructions(&dictionary(), &["Toy Story (1995)".to_owned()]);
        assert!(text.contains("Groups: Animation, Comedy, Horror"), "{text}");
        assert!(text.contains("Tags: dark comedy"), "{text}");
        assert!(text.contains("1. Toy Story (1995)"), "{text}");
        assert_eq!(
            schema()["required"].as_array().unwrap().len(),
            schema()["properties"].as_object().unwrap().len()
        );
    }
}
