//! Custom field types: inferred from the first value seen, enforced after.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::CatalogError;
use crate::time::{parse_iso8601, parse_time_value};

/// Longest string value, in bytes.
pub const MAX_STRING_BYTES: usize = 16 * 1024;
/// Most dimensions of an embedding.
pub const MAX_EMBEDDING_DIMS: usize = 1024;
/// Largest object value, serialized, in bytes.
pub const MAX_OBJECT_BYTES: usize = 4 * 1024;

/// The type of a custom field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldType {
    #[serde(rename = "string")]
    String,
    #[serde(rename = "number")]
    Number,
    #[serde(rename = "boolean")]
    Boolean,
    #[serde(rename = "array<string>")]
    ArrayString,
    /// RFC 3339 string or unix number (s or ms).
    #[serde(rename = "time")]
    Time,
    /// Array of numbers.
    #[serde(rename = "embedding")]
    Embedding,
    /// Primary key (or keys) of rows in another table.
    #[serde(rename = "relation")]
    Relation,
    #[serde(rename = "object")]
    Object,
}

impl FieldType {
    pub const ALL: [FieldType; 8] = [
        FieldType::String,
        FieldType::Number,
        FieldType::Boolean,
        FieldType::ArrayString,
        FieldType::Time,
        FieldType::Embedding,
        FieldType::Relation,
        FieldType::Object,
    ];

    /// The name used on the wire.
    pub fn name(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Number => "number",
            FieldType::Boolean => "boolean",
            FieldType::ArrayString => "array<string>",
            FieldType::Time => "time",
            FieldType::Embedding => "embedding",
            FieldType::Relation => "relation",
            FieldType::Object => "object",
        }
    }

    /// Parses a wire name.
    pub fn from_name(name: &str) -> Option<FieldType> {
        FieldType::ALL.into_iter().find(|t| t.name() == name)
    }

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
    fn size_limits() {
        let long = "x".repeat(MAX_STRING_BYTES + 1);
        assert!(FieldType::String.check("s", &json!(long)).is_err());
        let wide: Vec<f32> = vec![0.5; MAX_EMBEDDING_DIMS + 1];
        assert!(FieldType::Embedding.check("e", &json!(wide)).is_err());
        let big = json!({ "blob": "y".repeat(MAX_OBJECT_BYTES) });
        assert!(FieldType::Object.check("o", &big).is_err());
    }
}
