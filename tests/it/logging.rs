//! `--log-format json` and `--log FILTER`: what an operator's log shipper reads.

use std::process::Command;

use crate::common::*;
use serde_json::Value;

#[test]
fn json_logs_are_one_object_per_line_filtered_by_the_log_flag() {
    let mut server = TestServer::start_with(&[], &["--log-format", "json", "--log", "warn,rankstream::server=debug"]);
    assert_status(&server.admin_get("/v1/admin/stats"), 200, "stats");
    server.stop();
    let logged: Vec<Value> = server
        .output()
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .collect();
    assert!(!logged.is_empty(), "no JSON log line:\n{}", server.output());
    for line in &logged {
        assert!(line["timestamp"].is_string(), "{line}");
        assert!(line["fields"]["message"].is_string(), "{line}");
        let (level, target) = (line["level"].as_str().unwrap(), line["target"].as_str().unwrap());
        // The filter: warnings from anywhere, everything from rankstream::server only.
        assert!(
            ["WARN", "ERROR"].contains(&level) || target.starts_with("rankstream::server"),
            "{line} passed the filter"
        );
    }
    assert!(
        logged
            .iter()
            .any(|line| line["target"] == "rankstream::server" && line["level"] == "INFO"),
        "the server's own info lines are kept: {logged:?}"
    );
    // Lines that are not logs (the listening line) stay plain text on stdout.
    assert!(server
        .output()
        .lines()
        .any(|line| line.starts_with("rankstream listening on ")));
}

#[test]
fn a_log_filter_that_does_not_parse_stops_the_start_with_a_reason() {
    let data = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_rankstream"))
        .args(["serve", "--bind", "127.0.0.1:0", "--log", "rankstream=loud"])
        .arg("--data-dir")
        .arg(data.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("--log \"rankstream=loud\" is not a log filter"), "{said}");
}
