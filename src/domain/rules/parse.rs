//! Reading rules from a request's (or a models.toml entry's) fields, with an error
//! that names the place of anything malformed (`filters[2].value`).

use super::*;

/// The rules among `body`'s fields (`None` when it has none of them).
pub(super) fn rules(body: &Map<String, Value>) -> Result<Option<Rules>, RuleError> {
    let given = |name: &str| body.get(name).filter(|value| !value.is_null());
    if RULE_FIELDS.iter().all(|name| given(name).is_none()) {
        return Ok(None);
    }
    let mut budget = MAX_PREDICATES;
    let mut rules = Rules::default();
    if let Some(ids) = given("exclude_ids") {
        rules.exclude_ids = exclude_ids(ids)?;
    }
    if let Some(filters) = given("filters") {
        rules.filters = each(filters, "filters", "predicates", |filter, at| {
            predicate(filter, at, 0, &mut budget)
        })?;
    }
    if let Some(boosts) = given("boosts") {
        rules.boosts = each(boosts, "boosts", "objects", |value, at| boost(value, at, &mut budget))?;
    }
    if let Some(value) = given("diversity") {
        rules.diversity = Some(parse_diversity(value)?);
    }
    Ok(Some(rules))
}

/// `parse` of each element of the array `value` (the rule list `name`), with its place
/// (`filters[2]`); an error when `value` is no array of `what`.
fn each<T>(
    value: &Value,
    name: &str,
    what: &str,
    mut parse: impl FnMut(&Value, &str) -> Result<T, RuleError>,
) -> Result<Vec<T>, RuleError> {
    let Value::Array(values) = value else {
        return Err(RuleError(format!("\"{name}\" must be an array of {what}")));
    };
    values
        .iter()
        .enumerate()
        .map(|(i, value)| parse(value, &format!("{name}[{i}]")))
        .collect()
}

fn exclude_ids(value: &Value) -> Result<FxHashSet<String>, RuleError> {
    let wrong = || RuleError("\"exclude_ids\" must be an array of strings".into());
    let Value::Array(ids) = value else { return Err(wrong()) };
    if ids.len() > MAX_EXCLUDED {
        return Err(RuleError(format!("at most {MAX_EXCLUDED} \"exclude_ids\"")));
    }
    ids.iter()
        .map(|id| id.as_str().map(str::to_owned).ok_or_else(wrong))
        .collect()
}

/// Keys a predicate object may have, besides a boost's `multiply` and `add`.
const COMPARISON_KEYS: [&str; 3] = ["field", "op", "value"];
const COMPOSITION_KEYS: [&str; 3] = ["all", "any", "not"];

fn predicate(value: &Value, at: &str, depth: usize, budget: &mut usize) -> Result<Predicate, RuleError> {
    let Value::Object(object) = value else {
        return Err(RuleError(format!("{at} must be an object")));
    };
    predicate_of(object, at, depth, budget, &[])
}

/// The predicate in `object`, whose keys outside a predicate's must be in `other_keys`.
fn predicate_of(
    object: &Map<String, Value>,
    at: &str,
    depth: usize,
    budget: &mut usize,
    other_keys: &[&str],
) -> Result<Predicate, RuleError> {
    if depth > MAX_DEPTH {
        return Err(RuleError(format!("{at}: predicates nest at most {MAX_DEPTH} deep")));
    }
    *budget = budget
        .checked_sub(1)
        .ok_or_else(|| RuleError(format!("at most {MAX_PREDICATES} predicates per request")))?;
    if let Some(unknown) = object.keys().find(|key| {
        let key = key.as_str();
        !COMPARISON_KEYS.contains(&key) && !COMPOSITION_KEYS.contains(&key) && !other_keys.contains(&key)
    }) {
        return Err(RuleError(format!(
            "{at}: unknown key {unknown:?} (a predicate is {{\"field\", \"op\", \"value\"}}, {{\"all\": [...]}}, {{\"any\": [...]}} or {{\"not\": {{...}}}})"
        )));
    }
    let composed: Vec<&str> = COMPOSITION_KEYS
        .into_iter()
        .filter(|key| object.contains_key(*key))
        .collect();
    match composed.as_slice() {
        [] => comparison(object, at),
        [key] if !COMPARISON_KEYS.iter().any(|k| object.contains_key(*k)) => {
            let inner = &object[*key];
            let nested = format!("{at}.{key}");
            match *key {
                "not" => Ok(Predicate::Not(Box::new(predicate(inner, &nested, depth + 1, budget)?))),
                _ => {
                    let Value::Array(list) = inner else {
                        return Err(RuleError(format!("{nested} must be an array of predicates")));
                    };
                    let list = list
                        .iter()
                        .enumerate()
                        .map(|(i, p)| predicate(p, &format!("{nested}[{i}]"), depth + 1, budget))
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok(match *key {
                        "all" => Predicate::All(list),
                        _ => Predicate::Any(list),
                    })
                }
            }
        }
        _ => Err(RuleError(format!(
            "{at}: one of \"field\"/\"op\"/\"value\", \"all\", \"any\" and \"not\" per predicate"
        ))),
    }
}

/// The ops a comparison may use.
const OPS: &str = "eq, ne, in, nin, lt, lte, gt, gte, range, exists";

fn comparison(object: &Map<String, Value>, at: &str) -> Result<Predicate, RuleError> {
    let field = match object.get("field") {
        Some(Value::String(field)) if !field.is_empty() => field.clone(),
        _ => return Err(RuleError(format!("{at}.field must be a non-empty string"))),
    };
    let Some(Value::String(op)) = object.get("op") else {
        return Err(RuleError(format!("{at}.op must be one of {OPS}")));
    };
    let value = object.get("value");
    let need = |what: &str| RuleError(format!("{at}.value must be {what} for \"{op}\""));
    let scalar = || match value {
        Some(value @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => Ok(FieldValue::from(value)),
        _ => Err(need("a string, number or boolean")),
    };
    let list = || match value {
        Some(Value::Array(values)) if values.iter().all(|v| !v.is_array() && !v.is_object()) => {
            Ok(values.iter().map(FieldValue::from).collect())
        }
        _ => Err(need("an array of strings, numbers or booleans")),
    };
    let bound = |value: Option<&Value>| match value {
        Some(Value::Number(number)) => number
            .as_f64()
            .map(Bound::Number)
            .ok_or_else(|| need("a number or a string")),
        Some(Value::String(text)) => Ok(Bound::Text(CompactString::from(text.as_str()))),
        _ => Err(need("a number or a string")),
    };
    let test = match op.as_str() {
        "eq" => Test::Eq(scalar()?),
        "ne" => Test::Ne(scalar()?),
        "in" => Test::In(list()?),
        "nin" => Test::Nin(list()?),
        "lt" => Test::Lt(bound(value)?),
        "lte" => Test::Lte(bound(value)?),
        "gt" => Test::Gt(bound(value)?),
        "gte" => Test::Gte(bound(value)?),
        "range" => match value {
            Some(Value::Array(ends)) if ends.len() == 2 => {
                let (low, high) = (bound(ends.first())?, bound(ends.get(1))?);
                if std::mem::discriminant(&low) != std::mem::discriminant(&high) {
                    return Err(need("[low, high], both numbers or both strings"));
                }
                Test::Range(low, high)
            }
            _ => return Err(need("[low, high]")),
        },
        "exists" => match value {
            None | Some(Value::Null) => Test::Exists(true),
            Some(Value::Bool(wanted)) => Test::Exists(*wanted),
            Some(_) => return Err(need("true or false (or absent)")),
        },
        _ => return Err(RuleError(format!("{at}.op {op:?} is not one of {OPS}"))),
    };
    Ok(Predicate::Field {
        field: FieldName::new(field),
        test,
    })
}

fn boost(value: &Value, at: &str, budget: &mut usize) -> Result<Boost, RuleError> {
    let Value::Object(object) = value else {
        return Err(RuleError(format!("{at} must be an object")));
    };
    let factor = |name: &str| match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_f64() {
            Some(number) if number.is_finite() => Ok(Some(number)),
            _ => Err(RuleError(format!("{at}.{name} must be a number"))),
        },
    };
    let (multiply, add) = (factor("multiply")?, factor("add")?);
    if multiply.is_none() && add.is_none() {
        return Err(RuleError(format!("{at} needs \"multiply\" or \"add\"")));
    }
    Ok(Boost {
        when: predicate_of(object, at, 0, budget, &["multiply", "add"])?,
        multiply: multiply.unwrap_or(1.0),
        add: add.unwrap_or(0.0),
    })
}

fn parse_diversity(value: &Value) -> Result<Diversity, RuleError> {
    let Value::Object(object) = value else {
        return Err(RuleError("\"diversity\" must be an object".into()));
    };
    if let Some(unknown) = object
        .keys()
        .find(|key| !["field", "max_per_value", "top_k"].contains(&key.as_str()))
    {
        return Err(RuleError(format!(
            "diversity: unknown key {unknown:?} (it has \"field\", \"max_per_value\" and \"top_k\")"
        )));
    }
    let field = match object.get("field") {
        Some(Value::String(field)) if !field.is_empty() => field.clone(),
        _ => return Err(RuleError("diversity.field must be a non-empty string".into())),
    };
    let positive = |name: &str| match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match crate::domain::whole_number(value) {
            Some(number) if number >= 1 => Ok(Some(number as usize)),
            _ => Err(RuleError(format!("diversity.{name} must be an integer >= 1"))),
        },
    };
    let max_per_value =
        positive("max_per_value")?.ok_or_else(|| RuleError("diversity.max_per_value is required".into()))?;
    Ok(Diversity {
        field: FieldName::new(field),
        max_per_value,
        top_k: positive("top_k")?,
    })
}
