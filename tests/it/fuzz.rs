//! A bounded slice of the body fuzzing run (`tools/src/bin/bench-fuzz.rs`; the million-body
//! run is in BENCHMARKS.md, "Fuzzing: one million bodies"): 20,000 generated and
//! mutated bodies over every operation of the OpenAPI document the release binary
//! serves, on 16 keep-alive connections. Nothing answers >= 500, no connection is
//! reset mid-request or left without an answer, the server logs no panic and is
//! alive afterwards (`bench-fuzz --check`).

use std::process::Command;

use crate::common::tool_binary;

#[test]
fn twenty_thousand_fuzzed_bodies_get_no_server_error_and_no_dropped_connection() {
    let _heavy = crate::common::heavy_test();
    let output = Command::new(tool_binary("bench-fuzz"))
        .args(["--bodies", "20000", "--connections", "16", "--check", "--server-bin"])
        .arg(env!("CARGO_BIN_EXE_rankstream"))
        .output()
        .expect("bench-fuzz runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "bench-fuzz --check failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("bodies sent: 20,000 "), "{stdout}");
    assert!(stdout.contains("responses >= 500: 0 "), "{stdout}");
}
