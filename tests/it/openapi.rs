//! `GET /openapi.json` and schema fuzzing: the document the binary serves describes
//! every route it answers, and `schemathesis` (installed by tools/setup.sh) finds no
//! response that breaks it, with every check it has.

use std::path::PathBuf;
use std::process::Command;

use crate::common::*;

fn document(server: &TestServer) -> Value {
    let reply = server
        .send(Method::GET, "/openapi.json", Auth::None, Payload::Empty, &[])
        .pair();
    assert_status(&reply, 200, "openapi.json without a key").clone()
}

/// Every documented operation is routed (never 404 or 405), secured ones answer 401
/// without a key and open ones 200 (a path parameter that the document limits to a set
/// of values gets the first); and the SPEC's endpoints are all documented.
#[test]
fn the_document_lists_the_routes_the_server_answers() {
    let server = TestServer::start();
    let document = document(&server);
    assert_eq!(document["openapi"], "3.1.0");
    let paths = document["paths"].as_object().expect("paths");
    for spec_path in [
        "/v1/recommend",
        "/v1/recommend/module",
        "/v1/users",
        "/v1/users/{uid}",
        "/v1/catalog/table",
        "/v1/catalog/item",
        "/catalog/engagement",
        "/cds/engagement",
        "/v1/events",
        "/v1/search",
        "/v1/search/rerank",
        "/search/rerank",
        "/chat",
        "/v1/chat",
        "/embed",
        "/v1/embed",
        "/v1/catalog/item/{table}/{id}",
        "/v1/catalog/table/{name}/fields/{field}",
    ] {
        assert!(paths.contains_key(spec_path), "{spec_path} is not documented");
    }
    let mut operations = 0;
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            operations += 1;
            let concrete = path
                .split('/')
                .map(
                    |segment| match segment.strip_prefix('{').and_then(|name| name.strip_suffix('}')) {
                        Some(name) => operation["parameters"]
                            .as_array()
                            .and_then(|parameters| parameters.iter().find(|p| p["name"] == name))
                            .and_then(|parameter| parameter["schema"]["enum"][0].as_str())
                            .unwrap_or("x")
                            .to_owned(),
                        None => segment.to_owned(),
                    },
                )
                .collect::<Vec<_>>()
                .join("/");
            let secured = operation["security"].as_array().is_some_and(|list| !list.is_empty());
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let reply = server.send(method.clone(), &concrete, Auth::None, Payload::Empty, &[]);
            let expected = if secured { 401 } else { 200 };
            assert_eq!(reply.status.as_u16(), expected, "{method} {concrete}: {:?}", reply.body);
            assert!(
                operation["responses"].get(expected.to_string()).is_some() || !secured,
                "{method} {path} does not document {expected}"
            );
        }
    }
    assert!(operations >= 40, "only {operations} operations");
}

/// Where tools/setup.sh installs schemathesis.
fn schemathesis() -> PathBuf {
    let tools = std::env::var_os("RANKSTREAM_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/rankstream/tools"));
    let path = tools.join("schemathesis/bin/schemathesis");
    assert!(path.exists(), "{} is missing: run tools/setup.sh", path.display());
    path
}

/// schemathesis against a live server from its own document: every check (no 5xx,
/// responses match their schemas, statuses and content types documented, schema-valid
/// data accepted, schema-invalid data refused, auth enforced, 405 with `Allow`), a
/// bounded number of examples per operation (`RANKSTREAM_FUZZ_EXAMPLES`, default 25),
/// a fixed seed. tools/schemathesis.toml holds the few documented exceptions.
#[test]
fn schemathesis_finds_nothing() {
    let _heavy = crate::common::heavy_test();
    // Its authentication checks send invalid keys to every operation, far more than the
    // 20 a minute an address may (tests/auth.rs tests that throttle).
    let server = TestServer::start_with_env(&[("RANKSTREAM__AUTH__FAILURES_PER_MINUTE", "1000000")]);
    let examples = std::env::var("RANKSTREAM_FUZZ_EXAMPLES").unwrap_or_else(|_| "25".into());
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tools/schemathesis.toml");
    // schemathesis reads a schemathesis.toml of its working directory and writes caches
    // there: give it an empty one.
    let work = tempfile::tempdir().expect("temp dir");
    let output = Command::new(schemathesis())
        .current_dir(work.path())
        .env("HYPOTHESIS_STORAGE_DIRECTORY", work.path().join("hypothesis"))
        .env("NO_COLOR", "1")
        .arg("--no-color")
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(format!("{}/openapi.json", server.base_url))
        .args(["--url", &server.base_url])
        .args(["-H", &format!("Authorization: Bearer {}", server.admin_key)])
        .args(["--checks", "all", "--max-examples", &examples, "--seed", "42"])
        .args([
            "--generation-database",
            "none",
            "--request-timeout",
            "20",
            "--workers",
            "1",
        ])
        .output()
        .expect("run schemathesis");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout
        .lines()
        .skip_while(|line| !line.starts_with("Test cases:"))
        .nth(1)
        .unwrap_or("(no summary)")
        .trim()
        .to_owned();
    println!("schemathesis, {examples} examples per operation: {summary}");
    assert!(
        output.status.success(),
        "schemathesis found problems ({summary}):\n{stdout}\n{}\nserver:\n{}",
        String::from_utf8_lossy(&output.stderr),
        server.output()
    );
    let generated: u64 = summary
        .split_whitespace()
        .next()
        .and_then(|count| count.parse().ok())
        .unwrap_or(0);
    assert!(generated >= 500, "only {generated} cases ran: {summary}");
}
