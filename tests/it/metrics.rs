//! `GET /metrics`: Prometheus' text format, scraped while events and recommend
//! requests run, checked by `promtool check metrics` (Debian's prometheus package,
//! installed by tools/setup.sh), and counting exactly what the load did.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::common::*;
use reqwest::blocking::Client;
use serde_json::{json, Value};

const ITEMS: usize = 20;
const WRITERS: usize = 2;
const BATCHES_PER_WRITER: usize = 40;
const EVENTS_PER_BATCH: usize = 10;

/// One scrape: the status, the content type and the body.
fn scrape(client: &Client, server: &TestServer, key: Option<&str>) -> (u16, String, String) {
    let mut request = client.get(format!("{}/metrics", server.base_url));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().expect("scrape");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, content_type, response.text().unwrap())
}

/// `promtool check metrics` on a scrape: its exit status and what it said.
fn promtool(text: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian package prometheus; tools/setup.sh installs it)");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), said)
}

/// Every sample of a scrape: `name{labels}` (as written) → value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// The sum of the samples of `name` whose labels contain every one of `labels`.
fn total(samples: &BTreeMap<String, f64>, name: &str, labels: &[&str]) -> f64 {
    samples
        .iter()
        .filter(|(series, _)| {
            let (series_name, series_labels) = series.split_once('{').unwrap_or((series.as_str(), ""));
            series_name == name && labels.iter().all(|label| series_labels.contains(label))
        })
        .map(|(_, value)| value)
        .sum()
}

#[test]
fn a_scrape_under_load_passes_promtool_and_counts_what_the_load_did() {
    let server = TestServer::start_unthrottled();
    let items: Vec<Value> = (0..ITEMS)
        .map(|n| json!({"id": format!("m{n}"), "title": format!("Metric item {n}"), "price": n as f64 + 0.5}))
        .collect();
    assert_status(&server.admin_put("/v1/catalog/items", json!(items)), 200, "catalog");
    let client = Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();

    // A scraper's key needs the `metrics` scope (or admin); nothing is shown without one.
    let scraper = server.create_key(&["metrics"], json!({"name": "prometheus"}));
    let ranker = server.create_key(&["recommend"], json!({"name": "ranker"}));
    assert_eq!(scrape(&client, &server, None).0, 401, "no key");
    assert_eq!(
        scrape(&client, &server, Some(&ranker)).0,
        403,
        "a key without the scope"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (url, key) = (server.base_url.clone(), server.admin_key.clone());
            thread::spawn(move || {
                let client = Client::builder().no_proxy().build().unwrap();
                for batch in 0..BATCHES_PER_WRITER {
                    let events: Vec<Value> = (0..EVENTS_PER_BATCH)
                        .map(|n| {
                            event(
                                "click",
                                json!({"id": format!("w{w}-{batch}-{n}"), "uid": format!("u{w}-{n}"),
                                       "sid": format!("s{w}-{n}"), "item_id": format!("m{}", (batch + n) % ITEMS),
                                       "click_type": "tile"}),
                            )
                        })
                        .collect();
                    let reply = client
                        .post(format!("{url}/v1/events"))
                        .bearer_auth(&key)
                        .json(&json!({ "events": events }))
                        .send()
                        .unwrap();
                    assert_eq!(reply.status().as_u16(), 202, "events");
                }
            })
        })
        .collect();
    let recommender = {
        let (url, key, stop) = (server.base_url.clone(), ranker.clone(), stop.clone());
        thread::spawn(move || {
            let client = Client::builder().no_proxy().build().unwrap();
            let mut answered = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let ids: Vec<String> = (0..ITEMS).map(|n| format!("m{n}")).collect();
                let reply = client
                    .post(format!("{url}/v1/recommend"))
                    .bearer_auth(&key)
                    .json(&json!({"user_id": "u0-1", "item_ids": ids, "model_id": "default"}))
                    .send()
                    .unwrap();
                assert_eq!(reply.status().as_u16(), 200, "recommend");
                answered += 1;
            }
            answered
        })
    };

    // Scrapes taken while the load runs: each is valid exposition text.
    for round in 0..3 {
        let (status, content_type, text) = scrape(&client, &server, Some(&scraper));
        assert_eq!(status, 200, "scrape {round}: {text}");
        assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
        let (valid, said) = promtool(&text);
        assert!(
            valid,
            "promtool check metrics, scrape {round} under load:\n{said}\n{text}"
        );
        thread::sleep(Duration::from_millis(100));
    }
    for writer in writers {
        writer.join().expect("a writer failed");
    }
    stop.store(true, Ordering::Relaxed);
    let recommended = recommender.join().expect("the recommender failed") as f64;

    // Posting a batch again: every event is a duplicate.
    let again: Vec<Value> = (0..EVENTS_PER_BATCH)
        .map(|n| {
            event(
                "click",
                json!({"id": format!("w0-0-{n}"), "uid": format!("u0-{n}"), "sid": format!("s0-{n}"),
                       "item_id": "m0", "click_type": "tile"}),
            )
        })
        .collect();
    assert_status(&server.ingest(json!({ "events": again })), 202, "the same batch again");

    let posted = (WRITERS * BATCHES_PER_WRITER * EVENTS_PER_BATCH) as f64;
    let text = poll_until(Duration::from_secs(10), "live actors and models in the scrape", || {
        let text = scrape(&client, &server, Some(&scraper)).2;
        let samples = samples(&text);
        let live = total(&samples, "rankstream_live_actors", &["kind=\"user\""]);
        let learned = total(&samples, "rankstream_model_events_learned", &[]);
        match live > 0.0 && learned >= posted {
            true => Ok(text),
            false => Err(format!("live users {live}, events learned {learned}")),
        }
    });
    let (valid, said) = promtool(&text);
    assert!(valid, "promtool check metrics, final scrape:\n{said}\n{text}");
    let samples = samples(&text);
    let count = |name: &str, labels: &[&str]| total(&samples, name, labels);
    assert_eq!(
        count("rankstream_events_ingested_total", &["source=\"rest\""]),
        posted,
        "{text}"
    );
    assert_eq!(
        count("rankstream_events_duplicated_total", &["source=\"rest\""]),
        EVENTS_PER_BATCH as f64
    );
    assert_eq!(count("rankstream_events_rejected_total", &["source=\"rest\""]), 0.0);
    let events_posts = ["endpoint=\"/v1/events\"", "method=\"POST\"", "status=\"202\""];
    assert_eq!(
        count("rankstream_http_requests_total", &events_posts),
        (WRITERS * BATCHES_PER_WRITER + 1) as f64
    );
    let recommends = ["endpoint=\"/v1/recommend\"", "status=\"200\""];
    assert_eq!(count("rankstream_http_requests_total", &recommends), recommended);
    assert_eq!(
        count("rankstream_http_request_duration_seconds_count", &recommends),
        recommended
    );
    assert!(count("rankstream_http_request_duration_seconds_bucket", &recommends) > 0.0);
    assert_eq!(count("rankstream_http_requests_total", &["status=\"401\""]), 1.0);
    assert_eq!(count("rankstream_http_requests_total", &["status=\"403\""]), 1.0);
    assert!(count("rankstream_commit_batch_writes_count", &[]) > 0.0, "{text}");
    assert!(count("rankstream_model_training_duration_seconds_count", &["stage=\"learn\""]) > 0.0);
    assert_eq!(count("rankstream_model_items", &[]), ITEMS as f64, "{text}");
    assert_eq!(count("rankstream_search_index_documents", &[]), ITEMS as f64);
    assert!(count("process_resident_memory_bytes", &[]) > 1_000_000.0);
    assert!(count("process_open_fds", &[]) > 0.0);

    // With the load over, the learner hands the memory it freed back once quiet.
    poll_until(Duration::from_secs(10), "the learner's release of freed memory", || {
        let now = self::samples(&scrape(&client, &server, Some(&scraper)).2);
        let stage = ["stage=\"release_memory\""];
        match total(&now, "rankstream_model_training_duration_seconds_count", &stage) {
            released if released > 0.0 => Ok(()),
            released => Err(format!("released {released} times")),
        }
    });
}
