//! `DELETE /v1/users/{uid}` forgets: a user whose sessions started anonymous,
//! with events, chats, recommends and searches, is deleted; then the purge runs,
//! the node stops, and every file under the data directory is scanned for the uid
//! and the session ids: RocksDB table files entry by entry with RocksDB's own reader
//! (compressed blocks and deletion markers included), the search index document by
//! document and term by term, and every file's raw bytes (WAL, MANIFEST, logs,
//! options), also for the ids in hex (how RocksDB's log prints keys). 0 hits.

use std::path::{Path, PathBuf};

use crate::common::movielens::{movies, wait_until_searchable};
use crate::common::*;

const UID: &str = "forget-me-u7Qx3";
/// Anonymous first, then linked by an event that carries both ids.
const FIRST_SESSION: &str = "forget-sess-Kp2a";
/// Anonymous, linked later, and used alone in a chat and a search.
const SECOND_SESSION: &str = "forget-sess-Wm9b";
/// Another user, whose records stay.
const KEEPER: &str = "keeper-u1";
const KEEPER_SESSION: &str = "keeper-sess-1";

fn click(id: &str, uid: Option<&str>, sid: Option<&str>, item: &str) -> Value {
    event(
        "click",
        json!({"id": id, "uid": uid, "sid": sid, "item_id": item, "click_type": "tile"}),
    )
}

/// A catalog to rank, search and chat over: the first MovieLens movies.
fn load_catalog(server: &TestServer) -> Vec<String> {
    let movies: Vec<_> = movies().into_iter().take(300).collect();
    let rows: Vec<Value> = movies.iter().map(|(row, _, _)| row.clone()).collect();
    assert_status(&server.admin_put(ITEMS, Value::Array(rows)), 200, "movies");
    let (_, id, movie) = movies.last().expect("movies");
    wait_until_searchable(server, &movie.title, &id.to_string());
    movies.iter().map(|(_, id, _)| id.to_string()).collect()
}

/// Everything a user leaves behind: a profile, events of two sessions that started
/// anonymous, chats (with the uid, and with a session only), recommends and searches.
fn leave_traces(server: &TestServer, items: &[String]) {
    assert_status(
        &server.admin_post("/v1/users", json!({"uid": UID, "country": "NO"})),
        200,
        "profile",
    );
    server.ingest_ok(click("f-a1", None, Some(FIRST_SESSION), &items[0]));
    server.ingest_ok(click("f-a2", None, Some(FIRST_SESSION), &items[1]));
    server.ingest_ok(click("f-a3", None, Some(SECOND_SESSION), &items[2]));
    server.ingest_ok(json!({"events": [
        click("f-u1", Some(UID), Some(FIRST_SESSION), &items[3]),
        click("f-u2", Some(UID), None, &items[4]),
        click("f-u3", Some(UID), Some(SECOND_SESSION), &items[5]),
        click("k-1", Some(KEEPER), Some(KEEPER_SESSION), &items[6]),
        click("k-2", None, Some(KEEPER_SESSION), &items[7]),
    ]}));
    server.ingest_ok(click("f-a4", None, Some(SECOND_SESSION), &items[8]));
    assert_status(&server.admin_get(&session_path(FIRST_SESSION)), 200, "session before");

    let chat = json!({"message": "comedies under 10 dollars", "user_id": UID, "conversation_id": "forget-chat-1"});
    assert_status(&server.admin_post("/chat", chat), 200, "chat with the uid");
    let chat = json!({"message": "something scary", "session_id": SECOND_SESSION, "conversation_id": "forget-chat-2"});
    assert_status(&server.admin_post("/chat", chat), 200, "chat in a session");
    let recommend =
        json!({"model_id": "default", "user_id": UID, "session_id": FIRST_SESSION, "item_ids": items[..20]});
    let shown = server.admin_post("/v1/recommend", recommend);
    let rec_id = assert_status(&shown, 200, "recommend")["rec_id"].clone();
    server.ingest_ok(event(
        "click",
        json!({"id": "f-u4", "uid": UID, "sid": FIRST_SESSION, "item_id": items[0], "click_type": "tile", "rec_id": rec_id}),
    ));
    for body in [
        json!({"query": "toy", "user_id": UID, "session_id": FIRST_SESSION}),
        json!({"query": "story", "session_id": SECOND_SESSION}),
    ] {
        assert_status(&server.admin_post("/v1/search", body), 200, "search");
    }
}

/// Deletes the user and checks the answer and what the API shows afterwards.
fn forget(server: &TestServer) {
    let reply = server.admin_delete(&format!("/v1/users/{UID}"));
    let body = assert_status(&reply, 200, "delete").clone();
    assert_eq!(body["deleted"], true, "{body}");
    assert_eq!(body["removed"]["events"], 4, "events with the uid: {body}");
    assert_eq!(
        body["removed"]["anonymous_events"], 4,
        "sid-only events of the user's sessions: {body}"
    );
    assert_eq!(body["events_removed"], 8, "{body}");
    let mut sessions: Vec<&str> = body["removed"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("sessions in {body}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    sessions.sort_unstable();
    assert_eq!(sessions, [FIRST_SESSION, SECOND_SESSION], "{body}");
    assert_eq!(body["removed"]["conversations"], 2, "{body}");
    assert!(body["purge_due_at"].as_i64().is_some(), "{body}");
}

fn assert_forgotten(server: &TestServer) {
    for id in ["f-a1", "f-a2", "f-a3", "f-a4", "f-u1", "f-u2", "f-u3", "f-u4"] {
        assert_error(&server.admin_get(&event_path(id)), 404, "not_found", id);
    }
    for sid in [FIRST_SESSION, SECOND_SESSION] {
        assert_error(&server.admin_get(&session_path(sid)), 404, "not_found", sid);
    }
    assert_error(&server.admin_get(&user_state_path(UID)), 404, "not_found", "user state");
    assert_error(
        &server.admin_get(&format!("/v1/users/{UID}")),
        404,
        "not_found",
        "profile",
    );
    for id in ["k-1", "k-2"] {
        assert_status(&server.admin_get(&event_path(id)), 200, "the other user's events stay");
    }
    assert_status(
        &server.admin_get(&session_path(KEEPER_SESSION)),
        200,
        "the other session stays",
    );
}

/// Runs the purge now and stops the node.
fn purge_and_stop(server: &mut TestServer) {
    let reply = server.admin_post("/v1/admin/compact", json!({}));
    let body = assert_status(&reply, 200, "compact").clone();
    assert!(
        body["compacted"]["ranges"].as_u64().unwrap_or(0) > 0,
        "ranges compacted: {body}"
    );
    server.stop();
}

/// Where each id was found, as `file: how`.
fn traces(data_dir: &Path, needles: &[&str]) -> Vec<String> {
    let needles: Vec<(String, Vec<u8>)> = needles
        .iter()
        .flat_map(|needle| {
            [
                (needle.to_string(), needle.as_bytes().to_vec()),
                (format!("{needle} (hex)"), hex(needle.as_bytes()).into_bytes()),
                (
                    format!("{needle} (HEX)"),
                    hex(needle.as_bytes()).to_uppercase().into_bytes(),
                ),
            ]
        })
        .collect();
    let mut found = Vec::new();
    let mut files = Vec::new();
    walk(data_dir, &mut files);
    assert!(
        files.iter().any(|file| is_table(file)),
        "no table files under {}",
        data_dir.display()
    );
    let mut tables = 0;
    for file in &files {
        let bytes = std::fs::read(file).unwrap_or_else(|error| panic!("read {}: {error}", file.display()));
        report(&mut found, file, "raw bytes", &bytes, &needles);
        if is_table(file) {
            let entries = rankstream_sstscan::entries(file)
                .unwrap_or_else(|error| panic!("RocksDB reads {}: {error}", file.display()));
            tables += 1;
            for (key, value) in entries {
                report(&mut found, file, "a key", &key, &needles);
                report(&mut found, file, "a value", &value, &needles);
            }
        }
    }
    assert!(tables > 0, "no table file was read");
    found.extend(search_index_traces(&data_dir.join("search"), &needles));
    found
}

fn report(found: &mut Vec<String>, file: &Path, part: &str, bytes: &[u8], needles: &[(String, Vec<u8>)]) {
    for (name, needle) in needles {
        if bytes.windows(needle.len()).any(|window| window == needle.as_slice()) {
            found.push(format!("{}: {name} in {part}", file.display()));
        }
    }
}

/// The search index's stored documents and terms, decoded by tantivy.
fn search_index_traces(directory: &Path, needles: &[(String, Vec<u8>)]) -> Vec<String> {
    use tantivy::schema::{Document as _, Value as _};
    let index = tantivy::Index::open_in_dir(directory).expect("open the search index");
    let reader = index.reader().expect("search index reader");
    let searcher = reader.searcher();
    let schema = index.schema();
    let mut found = Vec::new();
    let mut documents = 0;
    for (ordinal, segment) in searcher.segment_readers().iter().enumerate() {
        let store = segment.get_store_reader(0).expect("doc store");
        for document in store.iter::<tantivy::TantivyDocument>(segment.alive_bitset()) {
            let document = document.expect("a stored document");
            let text = document.to_json(&schema);
            documents += 1;
            report(&mut found, directory, "a stored document", text.as_bytes(), needles);
            for (_, value) in document.field_values() {
                if let Some(text) = value.as_str() {
                    report(&mut found, directory, "a stored field", text.as_bytes(), needles);
                }
            }
        }
        for (field, _) in schema.fields() {
            let inverted = segment.inverted_index(field).expect("inverted index");
            let mut terms = inverted.terms().stream().expect("terms");
            while terms.advance() {
                report(
                    &mut found,
                    directory,
                    &format!("a term of segment {ordinal}"),
                    terms.key(),
                    needles,
                );
            }
        }
    }
    assert!(documents > 0, "the search index holds no document");
    found
}

fn walk(directory: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(directory).unwrap_or_else(|error| panic!("list {}: {error}", directory.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            walk(&path, files);
        } else {
            files.push(path);
        }
    }
}

fn is_table(file: &Path) -> bool {
    file.extension().is_some_and(|extension| extension == "sst")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn needles() -> [&'static str; 3] {
    [UID, FIRST_SESSION, SECOND_SESSION]
}

#[test]
fn a_deleted_user_leaves_no_trace_in_any_file() {
    let mut server = TestServer::start_with_env(&[("RANKSTREAM__STORAGE__PURGE_DELAY_MS", "600000")]);
    let items = load_catalog(&server);
    leave_traces(&server, &items);
    // Before: the ids are in the files (the scan can find them).
    server.stop();
    let before = traces(server.data_path(), &needles());
    for needle in needles() {
        assert!(
            before.iter().any(|trace| trace.contains(&format!(": {needle} in"))),
            "the scan does not find {needle} before the deletion: {before:#?}"
        );
    }
    server.restart();

    forget(&server);
    assert_forgotten(&server);
    // A conversation of the user starts over: "more" carries no earlier constraint.
    let more = server.admin_post("/chat", json!({"message": "more", "conversation_id": "forget-chat-1"}));
    let constraints = &assert_status(&more, 200, "chat after")["constraints"];
    for carried in ["max_price", "groups"] {
        assert!(
            constraints.get(carried).is_none_or(Value::is_null),
            "the deleted conversation's {carried} came back: {constraints}"
        );
    }
    // Retraining learns only what is left: the other user's two events.
    let retrained = server.admin_post("/v1/admin/models/retrain", json!({}));
    assert_eq!(assert_status(&retrained, 200, "retrain")["events"], 2, "{retrained:?}");

    purge_and_stop(&mut server);
    let found = traces(server.data_path(), &needles());
    assert!(found.is_empty(), "traces of the deleted user:\n{}", found.join("\n"));
}

#[test]
fn a_crash_right_after_the_deletion_brings_nothing_back() {
    let mut server = TestServer::start_with_env(&[("RANKSTREAM__STORAGE__PURGE_DELAY_MS", "600000")]);
    let items = load_catalog(&server);
    leave_traces(&server, &items);
    forget(&server);
    server.kill();
    server.restart();
    assert_forgotten(&server);

    purge_and_stop(&mut server);
    let found = traces(server.data_path(), &needles());
    assert!(found.is_empty(), "traces of the deleted user:\n{}", found.join("\n"));
}

#[test]
fn the_purge_runs_by_itself_after_the_delay() {
    let server = TestServer::start_with_env(&[("RANKSTREAM__STORAGE__PURGE_DELAY_MS", "300")]);
    server.ingest_ok(click("p-1", Some(UID), Some(FIRST_SESSION), "item-1"));
    let purge =
        |server: &TestServer| assert_status(&server.admin_get("/v1/admin/stats"), 200, "stats")["purge"].clone();
    assert_eq!(purge(&server), json!({"runs": 0, "pending_shards": 0}));
    assert_status(&server.admin_delete(&format!("/v1/users/{UID}")), 200, "delete");
    poll_until(std::time::Duration::from_secs(30), "the scheduled purge", || {
        let purge = purge(&server);
        match (purge["runs"].as_u64(), purge["pending_shards"].as_u64()) {
            (Some(runs), Some(0)) if runs >= 1 => Ok(()),
            _ => Err(purge.to_string()),
        }
    });
}
