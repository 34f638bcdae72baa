//! Custom field types ([`FieldType`]): inferred from the first value seen, enforced
//! after, converted by a remap.

use serde_json::Value;

use super::CatalogError;
use crate::domain::catalog::FieldType;
use crate::timestamp::{parse_iso8601, parse_time_value};

/// Longest string value, in bytes.
pub const MAX_STRING_BYTES: usize = 16 * 1024;
/// Most dimensions of an embedding.
pub const MAX_EMBEDDING_DIMS: usize = 1024;
/// Largest object value, serialized, in bytes.
pub const MAX_OBJECT_BYTES: usize = 4 * 1024;

impl FieldType {
    /// The type a first value implies; `None` for null. A string field declared as a
    /// table relation is a relation.
    pub fn infer(value: &Value, declared_relation: bool) -> Option<FieldType> {
        Some(match value {
            Value::Null => return None,
            Value::Bool(_) => FieldType::Boolean,
            Value::Number(_) => FieldType::Number,
            Value::String(_) if declared_relation => FieldType::Relation,
            Value::String(text) if parse_iso8601(text).is_some() => FieldType::Time,
            Value::String(_) => FieldType::String,
            Value::Array(values) if declared_relation && values.iter().all(Value::is_string) => FieldType::Relation,
            Value::Array(values) if !values.is_empty() && values.iter().all(Value::is_number) => FieldType::Embedding,
            Value::Array(_) => FieldType::ArrayString,
            Value::Object(_) => FieldType::Object,
        })
    }

    /// Checks a non-null value against this type and the size limits.
    pub fn check(self, field: &str, value: &Value) -> Result<(), CatalogError> {
        let fits = match (self, value) {
            (FieldType::String, Value::String(_)) => true,
            (FieldType::Number, Value::Number(_)) => true,
            (FieldType::Boolean, Value::Bool(_)) => true,
            (FieldType::ArrayString, Value::Array(values)) => values.iter().all(Value::is_string),
            (FieldType::Time, value) => parse_time_value(value).is_some(),
            (FieldType::Embedding, Value::Array(values)) => values.iter().all(Value::is_number),
            (FieldType::Relation, Value::String(_)) => true,
            (FieldType::Relation, Value::Array(values)) => values.iter().all(Value::is_string),
            (FieldType::Object, Value::Object(_)) => true,
            _ => false,
        };
        if !fits {
            return Err(CatalogError::TypeMismatch {
                field: field.to_owned(),
                expected: self,
                got: describe(value),
            });
        }
        check_size(field, value)
    }
}

impl FieldType {
    /// A stored value as this type holds it (a remap): kept when it fits, converted
    /// where one reading is obvious (`"3"` → 3, 3 → `"3"`, `"true"` → true, a string →
    /// a one-string array, numbers → their strings, numeric strings → an embedding, an
    /// ISO 8601 time → RFC 3339); `None` when it does not convert or breaks a size limit.
    pub fn convert(self, value: &Value) -> Option<Value> {
        let text_of = |value: &Value| match value {
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            Value::Bool(flag) => Some(flag.to_string()),
            _ => None,
        };
        let converted = match (self, value) {
            (FieldType::String, Value::String(_) | Value::Number(_) | Value::Bool(_)) => Value::String(text_of(value)?),
            (FieldType::Number, Value::Number(_)) => value.clone(),
            (FieldType::Number, Value::String(text)) => number_of(text)?,
            (FieldType::Boolean, Value::Bool(_)) => value.clone(),
            (FieldType::Boolean, Value::String(text)) => match text.trim().to_ascii_lowercase().as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => return None,
            },
            (FieldType::ArrayString, Value::String(_)) => Value::Array(vec![value.clone()]),
            (FieldType::ArrayString, Value::Array(values)) => Value::Array(
                values
                    .iter()
                    .map(|value| text_of(value).map(Value::String))
                    .collect::<Option<_>>()?,
            ),
            (FieldType::Time, Value::String(text)) if parse_time_value(value).is_some() => {
                match crate::timestamp::parse_rfc3339(text) {
                    Some(_) => value.clone(),
                    None => Value::String(crate::timestamp::format_rfc3339(parse_iso8601(text)?)),
                }
            }
            (FieldType::Time, Value::Number(_)) if parse_time_value(value).is_some() => value.clone(),
            (FieldType::Embedding, Value::Array(values)) if !values.is_empty() => Value::Array(
                values
                    .iter()
                    .map(|value| match value {
                        Value::Number(_) => Some(value.clone()),
                        Value::String(text) => number_of(text),
                        _ => None,
                    })
                    .collect::<Option<_>>()?,
            ),
            (FieldType::Relation, Value::String(_) | Value::Number(_)) => Value::String(text_of(value)?),
            (FieldType::Relation, Value::Array(values)) if values.iter().all(Value::is_string) => value.clone(),
            (FieldType::Object, Value::Object(_)) => value.clone(),
            _ => return None,
        };
        self.check("", &converted).ok()?;
        Some(converted)
    }
}

/// A string holding a finite number, as a JSON number (an integer when it is one).
fn number_of(text: &str) -> Option<Value> {
    let text = text.trim();
    if let Ok(integer) = text.parse::<i64>() {
        return Some(Value::from(integer));
    }
    let float = text.parse::<f64>().ok().filter(|float| float.is_finite())?;
    serde_json::Number::from_f64(float).map(Value::Number)
}

/// What a value looks like, for error messages.
fn describe(value: &Value) -> String {
    match FieldType::infer(value, false) {
        Some(FieldType::Time) => "string".to_owned(),
        Some(FieldType::ArrayString) if !value.as_array().is_some_and(|a| a.iter().all(Value::is_string)) => {
            "array of mixed values".to_owned()
        }
        Some(found) => found.name().to_owned(),
        None => "null".to_owned(),
    }
}

fn check_size(field: &str, value: &Value) -> Result<(), CatalogError> {
    let too_large = |limit: String| -> Result<(), CatalogError> {
        Err(CatalogError::Invalid(format!("field {field:?} is too large: {limit}")))
    };
    match value {
        Value::String(text) if text.len() > MAX_STRING_BYTES => {
            too_large(format!("{} bytes, at most {MAX_STRING_BYTES}", text.len()))
        }
        Value::Array(values) if values.iter().all(Value::is_number) && values.len() > MAX_EMBEDDING_DIMS => {
            too_large(format!("{} dimensions, at most {MAX_EMBEDDING_DIMS}", values.len()))
        }
        Value::Array(values) => {
            match values
                .iter()
                .find_map(|v| v.as_str().filter(|s| s.len() > MAX_STRING_BYTES))
            {
                Some(long) => too_large(format!(
                    "an element of {} bytes, at most {MAX_STRING_BYTES}",
                    long.len()
                )),
                None => Ok(()),
            }
        }
        Value::Object(_) => {
            let size = serde_json::to_vec(value).map(|bytes| bytes.len()).unwrap_or(usize::MAX);
            if size > MAX_OBJECT_BYTES {
                too_large(format!("{size} bytes serialized, at most {MAX_OBJECT_BYTES}"))
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn infers_every_type() {
        let cases = [
            (json!("red"), false, FieldType::String),
            (json!(3.5), false, FieldType::Number),
            (json!(true), false, FieldType::Boolean),
            (json!(["a", "b"]), false, FieldType::ArrayString),
            (json!([]), false, FieldType::ArrayString),
            (json!("2024-05-01T10:00:00Z"), false, FieldType::Time),
            (json!([0.1, 0.2]), false, FieldType::Embedding),
            (json!("brand-7"), true, FieldType::Relation),
            (json!({"city": "Oslo"}), false, FieldType::Object),
        ];
        for (value, relation, expected) in cases {
            assert_eq!(FieldType::infer(&value, relation), Some(expected), "{value}");
            expected.check("f", &value).unwrap();
        }
        assert_eq!(FieldType::infer(&Value::Null, false), None);
    }

    #[test]
    fn mismatch_names_field_expected_and_got() {
        let error = FieldType::Number.check("price", &json!("cheap")).unwrap_err();
        match error {
            CatalogError::TypeMismatch { field, expected, got } => {
                assert_eq!(
                    (field.as_str(), expected, got.as_str()),
                    ("price", FieldType::Number, "string")
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(FieldType::Time.check("t", &json!(1_700_000_000)).is_ok());
        assert!(FieldType::Time.check("t", &json!("soon")).is_err());
        assert!(FieldType::ArrayString.check("t", &json!(["a", 1])).is_err());
    }

    #[test]
    fn conversions() {
        let cases = [
            (FieldType::Number, json!("3"), Some(json!(3))),
            (FieldType::Number, json!(" 2.5"), Some(json!(2.5))),
            (FieldType::Number, json!("abc"), None),
            (FieldType::Number, json!(true), None),
            (FieldType::String, json!(3), Some(json!("3"))),
            (FieldType::String, json!(["a"]), None),
            (FieldType::Boolean, json!("TRUE"), Some(json!(true))),
            (FieldType::Boolean, json!(1), None),
            (FieldType::ArrayString, json!("a"), Some(json!(["a"]))),
            (FieldType::ArrayString, json!([1, "b"]), Some(json!(["1", "b"]))),
            (
                FieldType::Time,
                json!("2024-01-02"),
                Some(json!("2024-01-02T00:00:00.000Z")),
            ),
            (FieldType::Time, json!(1_700_000_000), Some(json!(1_700_000_000))),
            (FieldType::Time, json!("soon"), None),
            (FieldType::Embedding, json!(["1", 2]), Some(json!([1, 2]))),
            (FieldType::Embedding, json!([]), None),
            (FieldType::Relation, json!(7), Some(json!("7"))),
            (FieldType::Object, json!("x"), None),
        ];
        for (to, value, expected) in cases {
            assert_eq!(to.convert(&value), expected, "{value} -> {}", to.name());
        }
    }

    #[test]
    fn size_limits() {
        let long = "x".repeat(MAX_STRING_BYTES + 1);
        assert!(FieldType::String.check("s", &json!(long)).is_err());
        let wide: Vec<f32> = vec![0.5; MAX_EMBEDDING_DIMS + 1];
        assert!(FieldType::Embedding.check("e", &json!(wide)).is_err());
        let big = json!({ "blob": "y".repeat(MAX_OBJECT_BYTES) });
        assert!(FieldType::Object.check("o", &big).is_err());
    }
}
