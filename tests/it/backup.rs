//! Backups: `POST /v1/admin/backup` taken while events and items are written, restored
//! with `rankstream restore` into a fresh data directory; every write acknowledged
//! before the backup began is there, none acknowledged after it ended is. And the
//! same round trip through `rankstream backup` of a stopped node.

use std::ffi::OsStr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use reqwest::blocking::Client;
use serde_json::{json, Value};

const WRITERS: usize = 2;

/// What a writer had acknowledged, and when.
#[derive(Default)]
struct Acknowledged {
    events: Vec<(Instant, String)>,
    items: Vec<(Instant, String)>,
}

/// Posts an event and upserts an item per round until `stop`, recording each
/// acknowledgement's time.
fn writer(w: usize, url: String, key: String, stop: Arc<AtomicBool>, acked: Arc<Mutex<Acknowledged>>) {
    let client = Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let id = format!("b{w}-{n}");
        let body = event(
            "click",
            json!({"id": id, "uid": format!("u{w}-{}", n % 50), "item_id": format!("it{w}-{}", n % 30), "click_type": "tile"}),
        );
        let reply = client
            .post(format!("{url}/v1/events"))
            .bearer_auth(&key)
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(reply.status().as_u16(), 202, "event {id}");
        acked.lock().unwrap().events.push((Instant::now(), id));
        let item = format!("it{w}-{n}");
        let reply = client
            .put(format!("{url}/v1/catalog/item"))
            .bearer_auth(&key)
            .json(&json!({"id": item, "title": format!("Backed up item {n}")}))
            .send()
            .unwrap();
        assert_eq!(reply.status().as_u16(), 200, "item {item}");
        acked.lock().unwrap().items.push((Instant::now(), item));
        n += 1;
    }
}

/// `rankstream <args>`; its stdout as JSON, or the failure with its stderr.
fn cli(args: &[&OsStr]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_rankstream"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "rankstream {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_backup_under_write_load_restores_every_write_acknowledged_before_it() {
    let mut server = TestServer::start_unthrottled();
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Acknowledged::default()));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (url, key, stop, acked) = (
                server.base_url.clone(),
                server.admin_key.clone(),
                stop.clone(),
                acked.clone(),
            );
            thread::spawn(move || writer(w, url, key, stop, acked))
        })
        .collect();
    thread::sleep(Duration::from_millis(1500));

    let began = Instant::now();
    let backup = assert_status(&server.admin_post("/v1/admin/backup", json!(null)), 200, "backup").clone();
    let ended = Instant::now();
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().expect("a writer failed");
    }
    assert!(backup["size_bytes"].as_u64().unwrap() > 0, "{backup}");
    assert!(backup["files"].as_u64().unwrap() > 0, "{backup}");
    assert!(
        backup["search_index"].as_str().unwrap().contains("rebuilds"),
        "{backup}"
    );
    let directory = backup["directory"].as_str().unwrap().to_owned();
    let listed = assert_status(&server.admin_get("/v1/admin/backup"), 200, "backups").clone();
    assert_eq!(listed["directory"], directory, "{listed}");
    assert_eq!(listed["backups"][0]["backup_id"], backup["backup_id"], "{listed}");
    assert_eq!(listed["running"], Value::Null, "{listed}");

    // Restore into the node's data directory, the old one moved aside.
    server.stop();
    let data = server.data_path().to_owned();
    let old = data.with_file_name("data-old");
    std::fs::rename(&data, &old).unwrap();
    let restored = cli(&[
        "restore".as_ref(),
        "--from".as_ref(),
        directory.as_ref(),
        "--data-dir".as_ref(),
        data.as_ref(),
    ]);
    assert_eq!(restored["backup_id"], backup["backup_id"], "{restored}");
    server.restart();

    let acked = acked.lock().unwrap();
    let (before, after): (Vec<_>, Vec<_>) = acked.events.iter().partition(|(at, _)| *at < began);
    let later: Vec<_> = after.iter().filter(|(at, _)| *at > ended).collect();
    assert!(
        before.len() > 10 && !later.is_empty(),
        "{} before, {} after",
        before.len(),
        later.len()
    );
    for (_, id) in &before {
        assert_status(
            &server.admin_get(&format!("/v1/events/{id}")),
            200,
            &format!("event {id}"),
        );
    }
    for (_, id) in &later {
        assert_eq!(
            server.admin_get(&format!("/v1/events/{id}")).0.as_u16(),
            404,
            "event {id} came after"
        );
    }
    let items_before: Vec<_> = acked.items.iter().filter(|(at, _)| *at < began).collect();
    for (_, id) in &items_before {
        assert_status(
            &server.admin_get(&format!("/v1/catalog/item/items/{id}")),
            200,
            &format!("item {id}"),
        );
    }
    // The search index was not in the backup: the node rebuilt it from the catalog.
    poll_until(Duration::from_secs(20), "ready", || {
        match server.admin_get("/readyz").0.as_u16() {
            200 => Ok(()),
            status => Err(status.to_string()),
        }
    });
    let (_, found) = server.admin_post("/v1/search", json!({"query": "backed up item"}));
    assert!(!found["items"].as_array().unwrap().is_empty(), "{found}");
    eprintln!(
        "backup {} of {} bytes in {} ms under load: {} events and {} items acknowledged before it, all restored",
        backup["backup_id"],
        backup["size_bytes"],
        backup["took_ms"],
        before.len(),
        items_before.len()
    );

    // A stopped node's directory through the CLI: the same kind of backup.
    server.stop();
    let offline = old.with_file_name("offline-backups");
    let taken = cli(&[
        "backup".as_ref(),
        "--to".as_ref(),
        offline.as_ref(),
        "--data-dir".as_ref(),
        old.as_ref(),
    ]);
    assert!(taken["size_bytes"].as_u64().unwrap() > 0, "{taken}");
    let again = old.with_file_name("again");
    cli(&[
        "restore".as_ref(),
        "--from".as_ref(),
        offline.as_ref(),
        "--data-dir".as_ref(),
        again.as_ref(),
    ]);
    assert!(again.join("CURRENT").is_file());
    // Never over a directory that holds anything.
    let refused = Command::new(env!("CARGO_BIN_EXE_rankstream"))
        .args(["restore", "--from"])
        .arg(&offline)
        .arg("--data-dir")
        .arg(&again)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is not empty"));
}
