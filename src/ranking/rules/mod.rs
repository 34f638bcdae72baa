//! Business rules: what a shop says about a ranking besides the model's scores. A
//! request sends them as optional fields (`exclude_ids`, `filters`, `boosts`,
//! `diversity`) and a model's entry in `config/models.toml` may carry the same keys as
//! its defaults. They apply after scoring and before `limit`:
//!
//! 1. Items in `exclude_ids`, and items failing any filter, are dropped: they never
//!    come back, whatever their score.
//! 2. Each boost whose predicate the item matches multiplies its score (`multiply`)
//!    and then adds to it (`add`), in the order given.
//! 3. The items are ordered best first (ties keep request order).
//! 4. `diversity` keeps at most `max_per_value` items per value of its field in the
//!    first `top_k` places (see [`Diversity`]).
//!
//! A predicate tests one field of the candidate: the request's attribute of that name,
//! else the catalog's field, and two virtual ones: `id` and `available` (false for an
//! item that cannot be had: see the catalog's availability fields). A field that holds
//! an array (`groups`, `tags`) matches when any element matches; `ne` and `nin` are the
//! negations of `eq` and `in` (no element equals). A missing field matches only the
//! negations and `exists: false`. Numbers compare as numbers, strings as strings
//! (RFC 3339 times in order); a number never equals a string.
//!
//! The rules themselves, and their reading from a request, are the domain's
//! ([`crate::domain::rules`]); this module applies them. Nothing here reads the
//! catalog: the service checks that the fields exist ([`Rules::fields`]) and attaches
//! each candidate's features before ranking.

use std::borrow::Cow;
use std::cmp::Ordering;

use compact_str::CompactString;
use rustc_hash::FxHashMap;

use crate::domain::candidate::Candidate;
use crate::domain::item_features::FieldValue;
use crate::domain::rules::{Bound, Diversity, FieldName, Predicate, Rules, Test};

/// The explanation's name for what the boosts added to a score.
pub const BOOST: &str = "boost";

/// An item kept by the rules: its place in the candidates, its final score and how
/// much the boosts changed it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placed {
    pub index: usize,
    pub score: f32,
    pub boost: f32,
}

/// Applies the rule sets in `stack` (a model's defaults, then the request's: every
/// exclusion and filter of each, their boosts in that order, the last diversity) to
/// scored candidates, and keeps the first `limit`.
pub fn apply(stack: &[&Rules], candidates: &[Candidate], scores: &[f32], limit: Option<usize>) -> Vec<Placed> {
    let limit = limit.unwrap_or(usize::MAX);
    let kept = |candidate: &Candidate| admits(stack, candidate);
    let mut placed: Vec<Placed> = candidates
        .iter()
        .zip(scores)
        .enumerate()
        .filter(|(_, (candidate, _))| kept(candidate))
        .map(|(index, (candidate, &score))| {
            let boosted = boosted(stack, candidate, score);
            Placed {
                index,
                score: boosted,
                boost: boosted - score,
            }
        })
        .collect();
    placed.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
    if let Some(diversity) = diversity(stack) {
        placed = diversity.arrange(placed, candidates, limit);
    }
    placed.truncate(limit);
    placed
}

/// Whether no rule set in `stack` excludes or filters out `candidate`.
pub fn admits(stack: &[&Rules], candidate: &Candidate) -> bool {
    stack.iter().all(|rules| {
        !rules.exclude_ids.contains(candidate.id.as_str())
            && rules.filters.iter().all(|filter| filter.matches(candidate))
    })
}

/// `score` after every boost of `stack` that matches `candidate`, in order.
pub fn boosted(stack: &[&Rules], candidate: &Candidate, score: f32) -> f32 {
    let mut boosted = f64::from(score);
    for boost in stack.iter().flat_map(|rules| &rules.boosts) {
        if boost.when.matches(candidate) {
            boosted = boosted * boost.multiply + boost.add;
        }
    }
    boosted as f32
}

/// The diversity rule of `stack`: the last set's that has one.
pub fn diversity<'r>(stack: &[&'r Rules]) -> Option<&'r Diversity> {
    stack.iter().rev().find_map(|rules| rules.diversity.as_ref())
}

impl Diversity {
    /// `placed` (best first) re-arranged so that the rule holds; at most `limit` kept.
    pub fn arrange(&self, placed: Vec<Placed>, candidates: &[Candidate], limit: usize) -> Vec<Placed> {
        let top_k = self.top_k.unwrap_or(usize::MAX).min(limit);
        let mut counts: FxHashMap<String, usize> = FxHashMap::default();
        let mut chosen = Vec::with_capacity(top_k.min(placed.len()));
        let mut passed_over = Vec::new();
        let mut rest = placed.into_iter();
        while chosen.len() < top_k {
            let Some(item) = rest.next() else {
                // Too few items keep to the rule: the answer ends here.
                return chosen;
            };
            let values = value_keys(field(&candidates[item.index], &self.field).as_deref());
            if values
                .iter()
                .all(|value| counts.get(value).copied().unwrap_or(0) < self.max_per_value)
            {
                for value in values {
                    *counts.entry(value).or_default() += 1;
                }
                chosen.push(item);
            } else {
                passed_over.push(item);
            }
        }
        // Passed-over items were all better than the rest: they follow in score order.
        chosen.extend(passed_over);
        chosen.extend(rest);
        chosen
    }
}

/// The values an item counts for in a diversity rule: each element of an array.
fn value_keys(value: Option<&FieldValue>) -> Vec<String> {
    let key = |value: &FieldValue| match value {
        FieldValue::Text(text) => Some(text.to_string()),
        FieldValue::Number(number) => Some(number.to_string()),
        FieldValue::Bool(flag) => Some(flag.to_string()),
        FieldValue::List(_) | FieldValue::Other => None,
    };
    match value {
        None => Vec::new(),
        Some(FieldValue::List(values)) => values.iter().filter_map(key).collect(),
        Some(value) => key(value).into_iter().collect(),
    }
}

/// A candidate's value of `field`: the virtual `id` and `available` (an item is
/// available unless its catalog row says it cannot be had: `availability`, or a stored
/// `available`, read as `ItemFeatures::available` reads them; an unknown item is), else
/// the request's attribute, else the catalog's field.
fn field<'c>(candidate: &'c Candidate, field: &FieldName) -> Option<Cow<'c, FieldValue>> {
    let features = candidate.features.as_deref();
    match field.name.as_str() {
        "id" => Some(Cow::Owned(FieldValue::Text(CompactString::from(candidate.id.as_str())))),
        "available" => {
            let available = features.is_none_or(|features| features.available != Some(false) && !features.deleted);
            Some(Cow::Owned(FieldValue::Bool(available)))
        }
        name => match candidate.attributes.get(name) {
            Some(value) => Some(Cow::Owned(FieldValue::from(value))),
            None => features?.field(field.id()?).map(Cow::Borrowed),
        },
    }
}

impl Predicate {
    pub fn matches(&self, candidate: &Candidate) -> bool {
        match self {
            Predicate::Field { field: name, test } => test.holds(field(candidate, name).as_deref()),
            Predicate::All(all) => all.iter().all(|predicate| predicate.matches(candidate)),
            Predicate::Any(any) => any.iter().any(|predicate| predicate.matches(candidate)),
            Predicate::Not(predicate) => !predicate.matches(candidate),
        }
    }
}

impl Test {
    /// Whether a field's value (`None`: the item has no such field) passes.
    fn holds(&self, value: Option<&FieldValue>) -> bool {
        match self {
            Test::Ne(wanted) => !any_element(value, |v| same(v, wanted)),
            Test::Nin(wanted) => !any_element(value, |v| wanted.iter().any(|w| same(v, w))),
            Test::Exists(wanted) => value.is_some() == *wanted,
            Test::Eq(wanted) => any_element(value, |v| same(v, wanted)),
            Test::In(wanted) => any_element(value, |v| wanted.iter().any(|w| same(v, w))),
            Test::Lt(bound) => any_element(value, |v| bound.compare(v) == Some(Ordering::Less)),
            Test::Lte(bound) => any_element(value, |v| {
                matches!(bound.compare(v), Some(Ordering::Less | Ordering::Equal))
            }),
            Test::Gt(bound) => any_element(value, |v| bound.compare(v) == Some(Ordering::Greater)),
            Test::Gte(bound) => any_element(value, |v| {
                matches!(bound.compare(v), Some(Ordering::Greater | Ordering::Equal))
            }),
            Test::Range(low, high) => any_element(value, |v| {
                matches!(low.compare(v), Some(Ordering::Greater | Ordering::Equal))
                    && matches!(high.compare(v), Some(Ordering::Less | Ordering::Equal))
            }),
        }
    }
}

/// Whether `value`, or any of its elements when it is an array, passes `test`.
fn any_element(value: Option<&FieldValue>, test: impl Fn(&FieldValue) -> bool) -> bool {
    match value {
        None => false,
        Some(FieldValue::List(values)) => values.iter().any(test),
        Some(value) => test(value),
    }
}

/// Equality as a shop means it: numbers by value (2 = 2.0), strings and booleans
/// exactly; nothing equals an array, an object or null.
fn same(a: &FieldValue, b: &FieldValue) -> bool {
    match (a, b) {
        (FieldValue::Number(a), FieldValue::Number(b)) => a == b,
        (FieldValue::Text(a), FieldValue::Text(b)) => a == b,
        (FieldValue::Bool(a), FieldValue::Bool(b)) => a == b,
        _ => false,
    }
}

impl Bound {
    /// How `value` compares to the bound (`value` on the left); `None` across types.
    fn compare(&self, value: &FieldValue) -> Option<Ordering> {
        match (self, value) {
            (Bound::Number(bound), FieldValue::Number(value)) => value.partial_cmp(bound),
            (Bound::Text(bound), FieldValue::Text(value)) => Some(value.as_str().cmp(bound.as_str())),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{json, Map, Value};

    use super::*;
    use crate::domain::ItemFeatures;

    fn item(id: &str, row: Value) -> Candidate {
        let mut row = row.as_object().cloned().unwrap();
        row.insert("id".into(), json!(id));
        Candidate {
            id: id.into(),
            attributes: Map::new(),
            features: Some(Arc::new(ItemFeatures::from_row(&row))),
        }
    }

    fn rules(body: Value) -> Rules {
        Rules::from_fields(body.as_object().unwrap()).unwrap().unwrap()
    }

    fn shop() -> Vec<Candidate> {
        vec![
            item("a", json!({"price": 10, "groups": ["Sale", "Tours"], "brand": "x"})),
            item(
                "b",
                json!({"price": 25.5, "groups": ["Tours"], "brand": "y", "availability": "sold out"}),
            ),
            item(
                "c",
                json!({"price": 20, "groups": ["Sale"], "brand": "x", "released": "2024-05-01T00:00:00Z"}),
            ),
            item("d", json!({"groups": [], "brand": "z"})),
        ]
    }

    fn kept(rules: &Rules) -> Vec<&'static str> {
        let ids = ["a", "b", "c", "d"];
        let scores = [4.0, 3.0, 2.0, 1.0];
        apply(&[rules], &shop(), &scores, None)
            .into_iter()
            .map(|placed| ids[placed.index])
            .collect()
    }

    fn filtered(filter: Value) -> Vec<&'static str> {
        kept(&rules(json!({ "filters": [filter] })))
    }

    #[test]
    fn every_op_on_scalars_arrays_and_missing_fields() {
        assert_eq!(filtered(json!({"field": "price", "op": "eq", "value": 20.0})), ["c"]);
        assert_eq!(
            filtered(json!({"field": "price", "op": "ne", "value": 20})),
            ["a", "b", "d"]
        );
        assert_eq!(filtered(json!({"field": "price", "op": "lt", "value": 20})), ["a"]);
        assert_eq!(
            filtered(json!({"field": "price", "op": "lte", "value": 20})),
            ["a", "c"]
        );
        assert_eq!(filtered(json!({"field": "price", "op": "gt", "value": 20})), ["b"]);
        assert_eq!(
            filtered(json!({"field": "price", "op": "gte", "value": 20})),
            ["b", "c"]
        );
        assert_eq!(
            filtered(json!({"field": "price", "op": "range", "value": [10, 20]})),
            ["a", "c"]
        );
        assert_eq!(filtered(json!({"field": "price", "op": "exists"})), ["a", "b", "c"]);
        assert_eq!(
            filtered(json!({"field": "price", "op": "exists", "value": false})),
            ["d"]
        );
        assert_eq!(
            filtered(json!({"field": "groups", "op": "eq", "value": "Sale"})),
            ["a", "c"]
        );
        assert_eq!(
            filtered(json!({"field": "groups", "op": "ne", "value": "Sale"})),
            ["b", "d"]
        );
        assert_eq!(
            filtered(json!({"field": "groups", "op": "in", "value": ["Tours", "x"]})),
            ["a", "b"]
        );
        assert_eq!(
            filtered(json!({"field": "brand", "op": "nin", "value": ["x", "z"]})),
            ["b"]
        );
        assert_eq!(
            filtered(json!({"field": "available", "op": "eq", "value": true})),
            ["a", "c", "d"]
        );
        assert_eq!(
            filtered(json!({"field": "id", "op": "in", "value": ["d", "b"]})),
            ["b", "d"]
        );
        assert_eq!(
            filtered(json!({"field": "released", "op": "gte", "value": "2024-01-01"})),
            ["c"],
            "RFC 3339 strings compare in time order"
        );
        assert_eq!(
            filtered(json!({"field": "price", "op": "eq", "value": "20"})),
            Vec::<&str>::new()
        );
    }

    #[test]
    fn filters_compose_and_all_of_the_list_must_hold() {
        let list = rules(json!({"filters": [
            {"field": "groups", "op": "eq", "value": "Sale"},
            {"field": "price", "op": "gt", "value": 15}
        ]}));
        assert_eq!(kept(&list), ["c"]);
        let composed = json!({"any": [
            {"field": "brand", "op": "eq", "value": "z"},
            {"all": [{"field": "price", "op": "lt", "value": 30}, {"not": {"field": "groups", "op": "eq", "value": "Sale"}}]}
        ]});
        assert_eq!(filtered(composed), ["b", "d"]);
        assert_eq!(
            kept(&rules(
                json!({"exclude_ids": ["a", "zz"], "filters": [{"field": "brand", "op": "ne", "value": "z"}]})
            )),
            ["b", "c"]
        );
    }

    #[test]
    fn request_attributes_override_the_catalog() {
        let mut candidates = shop();
        candidates[3].attributes.insert("price".into(), json!(5));
        let rules = rules(json!({"filters": [{"field": "price", "op": "lt", "value": 15}]}));
        let placed = apply(&[&rules], &candidates, &[4.0, 3.0, 2.0, 1.0], None);
        assert_eq!(placed.iter().map(|p| p.index).collect::<Vec<_>>(), [0, 3]);
    }

    #[test]
    fn boosts_multiply_then_add_in_order_and_reorder() {
        let rules = rules(json!({"boosts": [
            {"field": "groups", "op": "in", "value": ["Sale"], "multiply": 2.0},
            {"not": {"field": "brand", "op": "eq", "value": "x"}, "add": 0.5}
        ]}));
        let placed = apply(&[&rules], &shop(), &[4.0, 3.0, 2.0, 1.0], Some(3));
        let got: Vec<(usize, f32, f32)> = placed.iter().map(|p| (p.index, p.score, p.boost)).collect();
        assert_eq!(got, [(0, 8.0, 4.0), (2, 4.0, 2.0), (1, 3.5, 0.5)]);
    }

    #[test]
    fn diversity_keeps_at_most_n_per_value_in_the_top_k() {
        let candidates: Vec<Candidate> = (0..8)
            .map(|i| {
                let brand = ["x", "x", "x", "y", "y", "y", "z", "z"][i];
                item(&format!("i{i}"), json!({ "brand": brand }))
            })
            .collect();
        let scores: Vec<f32> = (0..8).map(|i| 10.0 - i as f32).collect();
        let order = |body: Value, limit| -> Vec<usize> {
            apply(&[&rules(body)], &candidates, &scores, limit)
                .iter()
                .map(|p| p.index)
                .collect()
        };
        let two_per_brand = json!({"diversity": {"field": "brand", "max_per_value": 2, "top_k": 5}});
        // x x y y z in the top 5; the passed-over x and y follow, then the rest.
        assert_eq!(order(two_per_brand.clone(), None), [0, 1, 3, 4, 6, 2, 5, 7]);
        assert_eq!(order(two_per_brand, Some(3)), [0, 1, 3]);
        // Only 3 items keep to one per brand: the answer stops there.
        let one_per_brand = json!({"diversity": {"field": "brand", "max_per_value": 1}});
        assert_eq!(order(one_per_brand, Some(5)), [0, 3, 6]);
    }

    #[test]
    fn a_model_default_and_a_request_stack() {
        let model =
            rules(json!({"exclude_ids": ["a"], "boosts": [{"field": "brand", "op": "eq", "value": "z", "add": 10}]}));
        let request = rules(json!({"filters": [{"field": "brand", "op": "ne", "value": "y"}]}));
        let placed = apply(&[&model, &request], &shop(), &[4.0, 3.0, 2.0, 1.0], None);
        assert_eq!(placed.iter().map(|p| p.index).collect::<Vec<_>>(), [3, 2]);
    }
}
