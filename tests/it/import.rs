//! `rankstream import`: MovieLens from `../shared/data` into a running node (movies as
//! items, ratings as events), an import killed midway and resumed, and the rows a node
//! refuses written with their reasons.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::*;
use serde_json::Value;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/movielens_latest_small");

/// `rankstream import FILE --url <server> <args>` run in `dir` with the admin key.
fn import(server: &TestServer, dir: &Path, file: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rankstream"));
    command
        .current_dir(dir)
        .arg("import")
        .arg(file)
        .args(["--url", &server.base_url])
        .args(args)
        .env("RANKSTREAM_ADMIN_KEY", &server.admin_key)
        .stdin(Stdio::null());
    command
}

/// The summary an import printed, after checking it succeeded.
fn summary(output: Output) -> Value {
    assert!(
        output.status.success(),
        "import failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

const RATINGS: [&str; 9] = [
    "--kind",
    "events",
    "--event-type",
    "rating",
    "--map",
    "userId=uid",
    "--map",
    "movieId=item_id",
    "--batch-size",
];

#[test]
fn movielens_imports_resumes_after_a_kill_and_reports_rejected_rows() {
    let server = TestServer::start_unthrottled();
    let work = tempfile::tempdir().unwrap();
    let movies = Path::new(DATA).join("movies.csv");
    let args = [
        "--kind",
        "items",
        "--table",
        "movies",
        "--id-column",
        "movieId",
        "--map",
        "title=name",
        "--map",
        "genres=groups",
        "--split",
        "genres=|",
    ];
    let done = summary(import(&server, work.path(), &movies, &args).output().unwrap());
    assert_eq!(done["rows"], 9742, "{done}");
    assert_eq!(done["imported"], 9742, "{done}");
    assert_eq!(done["rejected"], 0, "{done}");
    eprintln!("movies: {done}");
    let (_, toy_story) = server.admin_get("/v1/catalog/item/movies/1");
    assert_eq!(toy_story["name"], "Toy Story (1995)", "{toy_story}");
    assert_eq!(
        toy_story["groups"],
        serde_json::json!(["Adventure", "Animation", "Children", "Comedy", "Fantasy"])
    );

    // Ratings as events, 10 a request (slow enough to be caught midway); killed once it
    // is past row 10,000, then resumed (1,000 a request: the batch size is free to change).
    let ratings = Path::new(DATA).join("ratings.csv");
    let with_batch = |size: &'static str| {
        let mut args: Vec<&str> = RATINGS.to_vec();
        args.extend([size, "--map", "timestamp=original_timestamp"]);
        args
    };
    let mut child = import(&server, work.path(), &ratings, &with_batch("10"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let state = work.path().join("ratings.csv.import-state.json");
    let stopped_at = poll_until(Duration::from_secs(120), "the import past row 10,000", || {
        let done = std::fs::read(&state)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .and_then(|state| state["rows_done"].as_u64())
            .unwrap_or(0);
        match done >= 10_000 {
            true => Ok(done),
            false => Err(format!("{done} rows done")),
        }
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let output = import(&server, work.path(), &ratings, &with_batch("1000"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    let done = summary(output);
    eprintln!("ratings, resumed: {done}");
    assert!(said.contains("resuming after row"), "{said}");
    let resumed_after = done["resumed_after"].as_u64().unwrap();
    assert!(resumed_after >= stopped_at, "{done}");
    assert_eq!(done["rows"].as_u64().unwrap(), 100_836 - resumed_after, "{done}");
    assert_eq!(done["rejected"], 0, "{done}");
    assert!(!state.exists(), "the state is removed once the file is through");

    // Every rating is applied once: users' event counts match the file.
    let mut per_user: HashMap<String, u64> = HashMap::new();
    let mut reader = csv::Reader::from_path(&ratings).unwrap();
    for record in reader.records() {
        *per_user.entry(record.unwrap()[0].to_owned()).or_default() += 1;
    }
    for uid in ["1", "305", "610"] {
        let state = server.user_state(uid);
        assert_eq!(state["event_count"], per_user[uid], "user {uid}: {state}");
    }
    let (_, event) = server.admin_get("/v1/events/ratings.csv:1");
    assert_eq!(event["type"], "rating", "{event}");
    assert_eq!(event["properties"]["rating"], 4.0, "{event}");
    let when = parse_time(&serde_json::json!("2000-07-30T18:45:03Z"));
    assert_eq!(parse_time(&event["original_timestamp"]), when, "{event}");

    // A row the node refuses, and a line that is not JSON: both in the rejected file.
    let bad = work.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"id\": \"ok1\", \"name\": \"fine\"}\n{\"name\": \"no id\"}\nnot json\n{\"id\": \"ok2\"}\n",
    )
    .unwrap();
    let done = summary(
        import(&server, work.path(), &bad, &["--kind", "items"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        (
            done["rows"].as_u64(),
            done["imported"].as_u64(),
            done["rejected"].as_u64()
        ),
        (Some(4), Some(2), Some(2)),
        "{done}"
    );
    let rejected = std::fs::read_to_string(work.path().join("bad.jsonl.rejected.jsonl")).unwrap();
    let lines: Vec<Value> = rejected
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let rows: Vec<u64> = lines.iter().map(|line| line["row"].as_u64().unwrap()).collect();
    assert_eq!(rows.len(), 2, "{rejected}");
    assert!(rows.contains(&2) && rows.contains(&3), "{rejected}");
    assert!(
        lines.iter().all(|line| !line["message"].as_str().unwrap().is_empty()),
        "{rejected}"
    );
}
