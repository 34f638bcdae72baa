//! Business rules, as a request or a model's entry in `config/models.toml` writes
//! them (`exclude_ids`, `filters`, `boosts`, `diversity`): what they are and how they
//! are read ([`Rules::from_fields`], with an error naming the place of anything
//! malformed). Every layer names them; what they do to a ranking (exclusions,
//! filters, boosts, diversity, applied after scoring) is `crate::ranking::rules`.
//!
//! A predicate tests one field of a candidate: the request's attribute of that name,
//! else the catalog's field, and the [`VIRTUAL_FIELDS`] `id` and `available`.

use std::sync::atomic::{AtomicU32, Ordering as AtomicOrdering};

use compact_str::CompactString;
use rustc_hash::FxHashSet;
use serde_json::{Map, Value};

use super::attributes::{field_key, interned, AttributeId};
use super::item_features::FieldValue;

mod parse;

/// The request (and models.toml) keys that hold rules.
pub const RULE_FIELDS: [&str; 4] = ["exclude_ids", "filters", "boosts", "diversity"];

/// Fields every candidate has whatever its table: its id and whether it can be had.
pub const VIRTUAL_FIELDS: [&str; 2] = ["id", "available"];

/// Deepest nesting of `any`/`all`/`not`.
const MAX_DEPTH: usize = 16;
/// Most predicates in one rule set, nested ones included.
const MAX_PREDICATES: usize = 1_000;
/// Most ids in `exclude_ids`.
pub const MAX_EXCLUDED: usize = 10_000;

/// A rule that cannot be read; the message says which and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct RuleError(pub String);

/// One source's rules (a request's, or a model's defaults).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    pub exclude_ids: FxHashSet<String>,
    /// All of them must hold.
    pub filters: Vec<Predicate>,
    pub boosts: Vec<Boost>,
    pub diversity: Option<Diversity>,
}

/// A test of a candidate, composable with `all`, `any` and `not`.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    Field { field: FieldName, test: Test },
    All(Vec<Predicate>),
    Any(Vec<Predicate>),
    Not(Box<Predicate>),
}

/// What a field's value is tested for.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    Eq(FieldValue),
    Ne(FieldValue),
    In(Vec<FieldValue>),
    Nin(Vec<FieldValue>),
    Lt(Bound),
    Lte(Bound),
    Gt(Bound),
    Gte(Bound),
    /// Both ends included.
    Range(Bound, Bound),
    /// `true`: present and not null.
    Exists(bool),
}

/// A field a rule names, with the id its name is interned under in the catalog's
/// features, once some item has it (looked up at the first use that finds it).
#[derive(Debug)]
pub struct FieldName {
    pub name: String,
    id: AtomicU32,
}

/// Not looked up yet, or no item had the field then.
const UNRESOLVED: u32 = u32::MAX;

impl FieldName {
    /// A field name not looked up yet.
    pub fn new(name: String) -> FieldName {
        FieldName {
            name,
            id: AtomicU32::new(UNRESOLVED),
        }
    }

    /// The interned id of the name; `None` while no catalog row has had the field.
    pub fn id(&self) -> Option<AttributeId> {
        match self.id.load(AtomicOrdering::Relaxed) {
            UNRESOLVED => {
                let id = interned(&field_key(&self.name))?;
                self.id.store(id, AtomicOrdering::Relaxed);
                Some(id)
            }
            id => Some(id),
        }
    }
}

impl Clone for FieldName {
    fn clone(&self) -> FieldName {
        FieldName {
            name: self.name.clone(),
            id: AtomicU32::new(self.id.load(AtomicOrdering::Relaxed)),
        }
    }
}

impl PartialEq for FieldName {
    fn eq(&self, other: &FieldName) -> bool {
        self.name == other.name
    }
}

/// The far side of an order comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    Number(f64),
    Text(CompactString),
}

/// A score change for the items a predicate matches: `score × multiply + add`.
#[derive(Debug, Clone, PartialEq)]
pub struct Boost {
    pub when: Predicate,
    pub multiply: f64,
    pub add: f64,
}

/// At most `max_per_value` items per value of `field` in the first `top_k` places
/// (every place when `top_k` is absent). The best items that keep to it take those
/// places in score order; the items passed over follow them. An item whose field holds
/// several values counts for each; an item without the field is never passed over.
/// When too few items keep to it to fill `top_k` places, the answer stops where they
/// run out: the rule holds over every place up to `top_k`.
#[derive(Debug, Clone, PartialEq)]
pub struct Diversity {
    pub field: FieldName,
    pub max_per_value: usize,
    pub top_k: Option<usize>,
}

impl Rules {
    /// The rules among `body`'s fields (`None` when it has none of them).
    pub fn from_fields(body: &Map<String, Value>) -> Result<Option<Rules>, RuleError> {
        parse::rules(body)
    }

    /// Every field a rule names, once each, in the order they appear.
    pub fn fields(&self) -> Vec<&str> {
        let mut fields = Vec::new();
        for predicate in self.filters.iter().chain(self.boosts.iter().map(|boost| &boost.when)) {
            predicate.fields(&mut fields);
        }
        if let Some(diversity) = &self.diversity {
            fields.push(diversity.field.name.as_str());
        }
        let mut seen = FxHashSet::default();
        fields.retain(|field| seen.insert(*field));
        fields
    }
}

impl Predicate {
    /// Appends every field this predicate names (nested ones included) to `out`.
    fn fields<'r>(&'r self, out: &mut Vec<&'r str>) {
        match self {
            Predicate::Field { field, .. } => out.push(&field.name),
            Predicate::All(predicates) | Predicate::Any(predicates) => {
                predicates.iter().for_each(|predicate| predicate.fields(out))
            }
            Predicate::Not(predicate) => predicate.fields(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules(body: Value) -> Rules {
        Rules::from_fields(body.as_object().unwrap()).unwrap().unwrap()
    }

    fn error(body: Value) -> String {
        Rules::from_fields(body.as_object().unwrap()).unwrap_err().0
    }

    #[test]
    fn the_fields_a_rule_set_names() {
        let rules = rules(json!({
            "filters": [{"any": [{"field": "a", "op": "exists"}, {"not": {"field": "b", "op": "eq", "value": 1}}]}],
            "boosts": [{"field": "a", "op": "eq", "value": 2, "multiply": 2}],
            "diversity": {"field": "c", "max_per_value": 1}
        }));
        assert_eq!(rules.fields(), ["a", "b", "c"]);
    }

    #[test]
    fn malformed_rules_say_what_is_wrong() {
        assert!(error(json!({"filters": {}})).contains("array"));
        assert!(error(json!({"filters": [{"field": "p", "op": "about", "value": 1}]})).contains("\"about\""));
        assert!(error(json!({"filters": [{"field": "p", "op": "in", "value": 1}]})).contains("filters[0].value"));
        assert!(error(json!({"filters": [{"field": "p", "op": "eq", "value": {}}]})).contains("filters[0].value"));
        assert!(error(json!({"filters": [{"op": "eq", "value": 1}]})).contains("field"));
        assert!(
            error(json!({"filters": [{"any": [{"field": "p", "op": "lt", "value": true}]}]}))
                .contains("filters[0].any[0]")
        );
        assert!(error(json!({"filters": [{"field": "p", "op": "eq", "value": 1, "not": {}}]})).contains("one of"));
        assert!(error(json!({"filters": [{"field": "p", "op": "eq", "value": 1, "boost": 2}]})).contains("\"boost\""));
        assert!(error(json!({"boosts": [{"field": "p", "op": "eq", "value": 1}]})).contains("multiply"));
        assert!(error(json!({"boosts": [{"field": "p", "op": "eq", "value": 1, "add": "x"}]})).contains("add"));
        assert!(error(json!({"diversity": {"field": "p"}})).contains("max_per_value"));
        assert!(error(json!({"diversity": {"field": "p", "max_per_value": 0}})).contains("max_per_value"));
        assert!(error(json!({"exclude_ids": ["a", 1]})).contains("exclude_ids"));
        let mut deep = json!({"field": "p", "op": "exists"});
        for _ in 0..20 {
            deep = json!({ "not": deep });
        }
        assert!(error(json!({ "filters": [deep] })).contains("nest"));
        assert_eq!(
            Rules::from_fields(json!({"filters": null}).as_object().unwrap()),
            Ok(None)
        );
    }
}
