//! rankstream's own account of how long its requests took: `requests[pattern]` of
//! `/v1/admin/stats`, from the parsed request head to the ready response, over
//! every request of that endpoint the server answered (the figure latency is judged
//! by; a client's figures add its own share of the cores and the queue).

use anyhow::{ensure, Context, Result};
use hyper::StatusCode;
use serde_json::Value;

use crate::client::Target;
use crate::stats::{ms, thousands};

/// One endpoint's request times, as `/v1/admin/stats` gives them.
#[derive(Debug, serde::Deserialize)]
pub struct ServerTimes {
    pub requests: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl ServerTimes {
    /// The times of the endpoint `pattern` (`/v1/recommend`, `/v1/search`).
    pub async fn read(target: &Target, pattern: &str) -> Result<ServerTimes> {
        let mut sender = target.connect().await?;
        let (status, body) = target.get(&mut sender, "/v1/admin/stats").await?;
        ensure!(status == StatusCode::OK, "GET /v1/admin/stats: {status}");
        let stats: Value = serde_json::from_slice(&body)?;
        let times = stats["requests"][pattern].clone();
        serde_json::from_value(times).with_context(|| format!("no {pattern} times in /v1/admin/stats"))
    }

    pub fn summary(&self) -> String {
        format!(
            "{} requests: p50 {}, p99 {}, p99.9 {}, max {}",
            thousands(self.requests as f64),
            ms(self.p50_ms),
            ms(self.p99_ms),
            ms(self.p999_ms),
            ms(self.max_ms)
        )
    }
}
