//! Timestamps on the wire: ISO 8601 strings with a date (RFC 3339, or any other ISO
//! 8601 form: a date alone, basic format, week and ordinal dates, no offset read as
//! UTC) or unix numbers (seconds, or milliseconds when above 1e12). Internally: unix
//! milliseconds; written back as RFC 3339.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

/// Unix numbers above this are milliseconds, below it seconds.
const MILLIS_THRESHOLD: f64 = 1e12;

/// Parses an RFC 3339 string into unix milliseconds.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(text).ok().map(|t| t.timestamp_millis())
}

/// Parses any ISO 8601 text with a date into unix milliseconds: a date-time (an absent
/// offset is UTC) or a date alone (its midnight, UTC).
pub fn parse_iso8601(text: &str) -> Option<i64> {
    if let Some(millis) = parse_rfc3339(text) {
        return Some(millis);
    }
    let text = text.trim();
    if let Ok(time) = iso8601::datetime(text) {
        let offset =
            chrono::FixedOffset::east_opt(time.time.tz_offset_hours * 3600 + time.time.tz_offset_minutes * 60)?;
        let local = naive_date(time.date)?.and_time(time.time.into_naive()?);
        return Some(local.and_local_timezone(offset).single()?.timestamp_millis());
    }
    // A date alone, which must be all of the text (the parser stops at what it reads).
    let midnight = naive_date(iso8601::date(text).ok()?)?.and_hms_opt(0, 0, 0)?.and_utc();
    let written = [
        midnight.format("%Y-%m-%d").to_string(),
        midnight.format("%Y%m%d").to_string(),
        midnight.format("%G-W%V-%u").to_string(),
        midnight.format("%GW%V%u").to_string(),
        midnight.format("%Y-%j").to_string(),
        midnight.format("%Y%j").to_string(),
    ];
    written.contains(&text.to_owned()).then(|| midnight.timestamp_millis())
}

/// The calendar day of an ISO 8601 date in any of its forms.
fn naive_date(date: iso8601::Date) -> Option<chrono::NaiveDate> {
    match date {
        // The crate's own conversion reads the weekday one day late (1 as Tuesday).
        iso8601::Date::Week { year, ww, d } => {
            let weekday = chrono::Weekday::try_from(u8::try_from(d.checked_sub(1)?).ok()?).ok()?;
            chrono::NaiveDate::from_isoywd_opt(year, ww, weekday)
        }
        date => date.into_naive(),
    }
}

/// Reads a JSON time value: an ISO 8601 string with a date or a unix number (s or ms).
pub fn parse_time_value(value: &Value) -> Option<i64> {
    match value {
        Value::String(text) => parse_iso8601(text),
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
        assert_eq!(parse_time_value(&json!("2023-11-14")), Some(1_699_920_000_000));
        assert_eq!(parse_time_value(&json!("2023")), None);
        assert_eq!(parse_time_value(&json!("2023-11-14x")), None);
        assert_eq!(parse_time_value(&json!(-5)), None);
        assert_eq!(parse_time_value(&json!(true)), None);
    }

    #[test]
    fn reads_every_iso8601_form_with_a_date() {
        let expected = 1_700_000_000_000;
        let day = 1_699_920_000_000;
        for (text, millis) in [
            ("2023-11-14T22:13:20Z", expected),
            ("2023-11-14T22:13:20.000+00:00", expected),
            ("2023-11-14T23:13:20+0100", expected),
            ("2023-11-14T23:13:20+01", expected),
            ("2023-11-14T22:13:20", expected),
            ("2023-11-14T22:13:20.5", expected + 500),
            ("20231114T221320Z", expected),
            ("2023-11-14", day),
            ("20231114", day),
            ("2023-W46-2", day),
            ("2023-W46-2T22:13:20Z", expected),
            ("2023-318", day),
        ] {
            assert_eq!(parse_iso8601(text), Some(millis), "{text}");
        }
        for text in [
            "",
            "14/11/2023",
            "2023-13-01",
            "2023-11-14T25:00:00Z",
            "22:13:20",
            "2023-11",
        ] {
            assert_eq!(parse_iso8601(text), None, "{text}");
        }
    }

    #[test]
    fn formats_with_millis_in_utc() {
        assert_eq!(format_rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }
}
