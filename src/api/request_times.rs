//! How long requests took inside the server, per endpoint, since it started: from
//! the parsed request head to the response being ready (routing, auth, reading the
//! body, the handler). It includes any wait for a CPU while that ran, but not the
//! wait before a worker picked the connection up or the writing of the response,
//! so set beside a client's figures it tells the server's own time from the queue.
//! Shown by `GET /v1/admin/stats` under `requests`.

use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};

use super::routes::ROUTES;

/// Longest time a histogram tells apart (longer requests count as this long).
const LONGEST_MICROS: u64 = 600_000_000;
/// Significant decimal digits of every recorded time.
const PRECISION: u8 = 2;

pub struct RequestTimes {
    /// Microseconds, one histogram per route, by its position in [`ROUTES`].
    by_route: Vec<Mutex<Histogram<u64>>>,
}

impl Default for RequestTimes {
    fn default() -> RequestTimes {
        let histogram = Histogram::new_with_bounds(1, LONGEST_MICROS, PRECISION).expect("valid histogram bounds");
        RequestTimes {
            by_route: ROUTES.iter().map(|_| Mutex::new(histogram.clone())).collect(),
        }
    }
}

impl RequestTimes {
    /// Counts a request of the route at `route_index` in [`ROUTES`].
    pub fn record(&self, route_index: usize, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        // A position past the table (a bug) goes uncounted rather than panic.
        if let Some(histogram) = self.by_route.get(route_index) {
            histogram.lock().saturating_record(micros);
        }
    }

    /// `{label: {requests, p50_ms, p90_ms, p99_ms, p999_ms, max_ms}}` for every
    /// endpoint that has served a request, labelled by its pattern.
    pub fn to_json(&self) -> Value {
        let mut endpoints = Map::new();
        for (route, histogram) in ROUTES.iter().zip(&self.by_route) {
            let histogram = histogram.lock().clone();
            if histogram.is_empty() {
                continue;
            }
            let ms = |micros: u64| micros as f64 / 1000.0;
            let at = |quantile: f64| ms(histogram.value_at_quantile(quantile));
            endpoints.insert(
                route.stats_label().to_owned(),
                json!({
                    "requests": histogram.len(),
                    "p50_ms": at(0.5),
                    "p90_ms": at(0.9),
                    "p99_ms": at(0.99),
                    "p999_ms": at(0.999),
                    "max_ms": ms(histogram.max()),
                }),
            );
        }
        Value::Object(endpoints)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The position in the route table of the route serving `path`.
    fn route_of(path: &str) -> usize {
        crate::api::routes::match_path(path).expect("a route").index
    }

    #[test]
    fn percentiles_per_endpoint_and_only_endpoints_that_served() {
        let times = RequestTimes::default();
        for micros in 1..=1000 {
            times.record(route_of("/v1/recommend"), Duration::from_micros(micros));
        }
        times.record(route_of("/healthz"), Duration::from_secs(7200));
        let json = times.to_json();
        let recommend = &json["/v1/recommend"];
        assert_eq!(recommend["requests"], 1000);
        let p50 = recommend["p50_ms"].as_f64().unwrap();
        let p99 = recommend["p99_ms"].as_f64().unwrap();
        assert!((0.49..=0.51).contains(&p50), "{recommend}");
        assert!((0.98..=1.0).contains(&p99), "{recommend}");
        assert!(
            (0.99..=1.01).contains(&recommend["max_ms"].as_f64().unwrap()),
            "{recommend}"
        );
        // Past the longest time a histogram holds, a request counts as that long.
        assert_eq!(json["/healthz"]["requests"], 1);
        assert!(json["/healthz"]["max_ms"].as_f64().unwrap() >= 590_000.0, "{json}");
        assert_eq!(json.as_object().unwrap().len(), 2, "{json}");
    }

    /// One label per route, each its pattern as before the route table (the stats'
    /// readers key on them), none twice.
    #[test]
    fn every_route_has_its_own_label() {
        let times = RequestTimes::default();
        for index in 0..ROUTES.len() {
            times.record(index, Duration::from_micros(10));
        }
        let json = times.to_json();
        let labels: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(labels.len(), ROUTES.len(), "{labels:?}");
        for route in ROUTES {
            assert!(
                labels.contains(&route.pattern),
                "{} has no label of its own",
                route.pattern
            );
        }
        for label in [
            "/v1/recommend",
            "/v1/admin/stats",
            "/v1/catalog/item/{table}/{id}",
            "/catalog/engagement",
        ] {
            assert_eq!(json[label]["requests"], 1, "{label}");
        }
    }
}
