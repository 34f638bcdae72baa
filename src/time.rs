//! Timestamps on the wire: RFC 3339 strings or unix numbers (seconds, or
//! milliseconds when above 1e12). Internally: unix milliseconds.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

/// Unix numbers above this are milliseconds, below it seconds.
const MILLIS_THRESHOLD: f64 = 1e12;

/// Parses an RFC 3339 string into unix milliseconds.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(text).ok().map(|t| t.timestamp_millis())
}

/// Reads a JSON time value: an RFC 3339 string or a unix number (s or ms).
pub fn parse_time_value(value: &Value) -> Option<i64> {
    match value {
        Value::String(text) => parse_rfc3339(text),
        Value::Number(number) => {
            let raw = number.as_f64()?;
            if !raw.is_finite() || raw < 0.0 {
                return None;
            }
            let millis = if raw > MILLIS_THRESHOLD { raw } else { raw * 1000.0 };
            // Year 9999 is the last one RFC 3339 can write.
            (millis < 253_402_300_800_000.0).then_some(millis as i64)
        }
        _ => None,
    }
}

/// Formats unix milliseconds as RFC 3339 UTC with milliseconds: `2026-11-22T03:14:51.123Z`.
pub fn format_rfc3339(millis: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(millis)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_every_form() {
        let expected = 1_700_000_000_000;
        assert_eq!(parse_time_value(&json!("2023-11-14T22:13:20Z")), Some(expected));
        assert_eq!(parse_time_value(&json!("2023-11-14T23:13:20+01:00")), Some(expected));
        assert_eq!(parse_time_value(&json!(1_700_000_000)), Some(expected));
        assert_eq!(parse_time_value(&json!(1_700_000_000_000i64)), Some(expected));
        assert_eq!(parse_time_value(&json!("yesterday")), None);
        assert_eq!(parse_time_value(&json!(-5)), None);
        assert_eq!(parse_time_value(&json!(true)), None);
    }

    #[test]
    fn formats_with_millis_in_utc() {
        assert_eq!(format_rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }
}
