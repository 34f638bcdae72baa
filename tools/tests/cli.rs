//! Every tool's command line: `--help` answers with its usage and exits 0, so each
//! tool's argument declarations pass clap's own consistency checks (duplicate names,
//! conflicting defaults), which run when a command is first parsed. This test also
//! makes `cargo test` build every tool beside the server: the server's integration
//! tests run `bench-fuzz` and `eval-search` from the same target directory.

use std::process::Command;

/// Each tool's binary, as cargo built it for this test.
const TOOLS: [(&str, &str); 14] = [
    ("bench-catalog", env!("CARGO_BIN_EXE_bench-catalog")),
    ("bench-chat", env!("CARGO_BIN_EXE_bench-chat")),
    ("bench-cluster", env!("CARGO_BIN_EXE_bench-cluster")),
    ("bench-embed", env!("CARGO_BIN_EXE_bench-embed")),
    ("bench-events", env!("CARGO_BIN_EXE_bench-events")),
    ("bench-faults", env!("CARGO_BIN_EXE_bench-faults")),
    ("bench-fuzz", env!("CARGO_BIN_EXE_bench-fuzz")),
    ("bench-memory", env!("CARGO_BIN_EXE_bench-memory")),
    ("bench-moves", env!("CARGO_BIN_EXE_bench-moves")),
    ("bench-recommend", env!("CARGO_BIN_EXE_bench-recommend")),
    ("bench-search", env!("CARGO_BIN_EXE_bench-search")),
    ("bench-soak", env!("CARGO_BIN_EXE_bench-soak")),
    ("eval-offline", env!("CARGO_BIN_EXE_eval-offline")),
    ("eval-search", env!("CARGO_BIN_EXE_eval-search")),
];

#[test]
fn every_tool_prints_its_usage_under_its_own_name() {
    for (name, binary) in TOOLS {
        let output = Command::new(binary)
            .arg("--help")
            .output()
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{name} --help failed: {}\n{stdout}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.contains(&format!("Usage: {name}")),
            "{name} --help printed:\n{stdout}"
        );
    }
}

#[test]
fn an_unknown_flag_is_refused_with_a_usage_error() {
    for (name, binary) in TOOLS {
        let output = Command::new(binary)
            .arg("--no-such-flag")
            .output()
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(output.status.code(), Some(2), "{name} accepted --no-such-flag");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--no-such-flag"), "{name}: {stderr}");
    }
}
