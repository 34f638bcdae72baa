//! A graceful stop under load: clients write events and catalog items while the node
//! gets SIGTERM. The node stops its stages in reverse order (HTTP drained first,
//! storage last), every task it spawned ends, and it exits 0 in time; started again
//! on the same data directory, it has every write it answered with a 2xx.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use reqwest::blocking::Client;

use crate::common::*;

/// Client threads per kind of write (events, catalog items).
const WRITERS_PER_KIND: usize = 2;
/// Users the event writers spread their events over, per writer.
const USERS_PER_WRITER: usize = 16;
/// Writes acknowledged (of each kind) before the SIGTERM, so the node is loaded.
const ACKED_BEFORE_STOP: usize = 200;
/// How long a node under this load may take from SIGTERM to its exit.
const EXIT_BOUND: Duration = Duration::from_secs(30);
/// How long the test waits for the node's last log lines after its exit.
const OUTPUT_WAIT: Duration = Duration::from_secs(10);
/// The stages in the order a node stops them.
const STOP_ORDER: [&str; 7] = ["http", "services", "cluster", "stream", "engine", "learning", "storage"];

/// What one client thread saw.
#[derive(Default)]
struct Written {
    /// Ids the node answered with a 2xx (events: accepted or duplicate; items: stored).
    acknowledged: Vec<String>,
    /// The items' titles as sent, by id.
    titles: BTreeMap<String, String>,
    /// Failures before the SIGTERM (none expected).
    errors: Vec<String>,
    /// Whether the client was still writing when the SIGTERM was sent.
    writing_at_stop: bool,
}

/// Which write a client thread sends.
#[derive(Clone, Copy)]
enum Kind {
    Events,
    Items,
}

/// Writes until the first failed request (the node stopped answering); every 2xx is
/// recorded, and before `stopping` every failure is an error.
fn write_until_refused(
    kind: Kind,
    writer: usize,
    base_url: &str,
    key: &str,
    stopping: &AtomicBool,
    acked_total: &AtomicUsize,
) -> Written {
    let client = Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an http client");
    let mut written = Written::default();
    for request in 0usize.. {
        let (method, path, body, ids) = match kind {
            Kind::Events => {
                let events: Vec<Value> = (0..1 + request % 3)
                    .map(|index| {
                        let n = request * 3 + index;
                        json!({
                            "id": format!("w{writer}-e{n}"), "type": "click",
                            "original_timestamp": rfc3339_ms(now()),
                            "uid": format!("w{writer}-u{}", n % USERS_PER_WRITER),
                            "item_id": format!("it-{}", n % 50), "click_type": "tile",
                        })
                    })
                    .collect();
                let ids = events
                    .iter()
                    .map(|event| event["id"].as_str().expect("an id").to_owned())
                    .collect::<Vec<_>>();
                (Method::POST, EVENTS.to_owned(), json!({ "events": events }), ids)
            }
            Kind::Items => {
                let id = format!("w{writer}-i{request}");
                let title = format!("item {request} of writer {writer}");
                written.titles.insert(id.clone(), title.clone());
                (
                    Method::PUT,
                    ITEM.to_owned(),
                    json!({"id": id, "title": title}),
                    vec![id],
                )
            }
        };
        let sent_before_stop = !stopping.load(Ordering::SeqCst);
        let reply = client
            .request(method.clone(), format!("{base_url}{path}"))
            .bearer_auth(key)
            .json(&body)
            .send()
            .and_then(|response| {
                let status = response.status();
                response.json::<Value>().map(|body| (status, body))
            });
        match reply {
            Ok((status, reply)) if status.is_success() => {
                if let Kind::Events = kind {
                    let answered = reply["accepted"].as_u64().unwrap_or(0) + reply["duplicates"].as_u64().unwrap_or(0);
                    if answered != ids.len() as u64 {
                        written
                            .errors
                            .push(format!("{status} for {} events: {reply}", ids.len()));
                    }
                }
                acked_total.fetch_add(ids.len(), Ordering::SeqCst);
                written.acknowledged.extend(ids);
            }
            failed => {
                written.writing_at_stop = stopping.load(Ordering::SeqCst);
                if sent_before_stop && !written.writing_at_stop {
                    written
                        .errors
                        .push(format!("{method} {path} before the stop: {failed:?}"));
                }
                return written;
            }
        }
    }
    unreachable!("the loop returns at the first failure")
}

/// The node's JSON log lines.
fn log_lines(output: &str) -> Vec<Value> {
    output
        .lines()
        .filter(|line| line.starts_with('{'))
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn message(line: &Value) -> &str {
    line["fields"]["message"].as_str().unwrap_or("")
}

#[test]
fn a_loaded_node_stops_every_task_in_order_and_keeps_every_acknowledged_write() {
    let mut server = TestServer::start_with(&UNTHROTTLED, &["--log-format", "json"]);
    let (base_url, key) = (server.base_url.clone(), server.admin_key.clone());
    let stopping = AtomicBool::new(false);
    let (acked_events, acked_items) = (AtomicUsize::new(0), AtomicUsize::new(0));

    let (written, took) = thread::scope(|scope| {
        let writers: Vec<_> = (0..WRITERS_PER_KIND * 2)
            .map(|writer| {
                let (kind, acked) = match writer % 2 {
                    0 => (Kind::Events, &acked_events),
                    _ => (Kind::Items, &acked_items),
                };
                let (base_url, key, stopping) = (&base_url, &key, &stopping);
                scope.spawn(move || write_until_refused(kind, writer, base_url, key, stopping, acked))
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while acked_events.load(Ordering::SeqCst) < ACKED_BEFORE_STOP
            || acked_items.load(Ordering::SeqCst) < ACKED_BEFORE_STOP
        {
            assert!(
                Instant::now() < deadline,
                "the writers did not get {ACKED_BEFORE_STOP} writes of each kind through in a minute"
            );
            assert!(
                writers.iter().all(|writer| !writer.is_finished()),
                "a writer stopped before the SIGTERM; output:\n{}",
                server.output()
            );
            thread::sleep(Duration::from_millis(10));
        }
        stopping.store(true, Ordering::SeqCst);
        let signalled = Instant::now();
        // SIGTERM, then the exit, asserted 0.
        server.stop();
        let took = signalled.elapsed();
        let written: Vec<Written> = writers
            .into_iter()
            .map(|writer| writer.join().expect("a writer thread"))
            .collect();
        (written, took)
    });
    assert!(took < EXIT_BOUND, "the node took {took:?} to exit after SIGTERM");
    for (writer, written) in written.iter().enumerate() {
        assert!(written.errors.is_empty(), "writer {writer}: {:?}", written.errors);
        assert!(
            written.writing_at_stop,
            "writer {writer} was not writing at the SIGTERM"
        );
    }

    // The log: each stage stopped, in reverse order of the start, and no task was left.
    let deadline = Instant::now() + OUTPUT_WAIT;
    let logged = loop {
        let logged = log_lines(&server.output());
        if logged.iter().any(|line| message(line).starts_with("node stopped")) {
            break logged;
        }
        assert!(
            Instant::now() < deadline,
            "no \"node stopped\" line; output:\n{}",
            server.output()
        );
        thread::sleep(Duration::from_millis(20));
    };
    let stopped_stages: Vec<&str> = logged
        .iter()
        .filter(|line| message(line) == "stage stopped")
        .filter_map(|line| line["fields"]["stage"].as_str())
        .collect();
    assert_eq!(stopped_stages, STOP_ORDER, "output:\n{}", server.output());
    for line in logged.iter().filter(|line| message(line) == "stage stopped") {
        let still_running = &line["fields"]["tasks_still_running"];
        assert!(
            still_running.is_null() || still_running == 0,
            "a stage left tasks running: {line}"
        );
    }
    let node_stopped = logged
        .iter()
        .find(|line| message(line).starts_with("node stopped"))
        .expect("the node stopped line");
    assert_eq!(node_stopped["fields"]["message"], "node stopped", "{node_stopped}");
    assert_eq!(node_stopped["fields"]["tasks_still_running"], 0, "{node_stopped}");
    // At least the HTTP server, the checkpoints, the metric upkeep and the purger.
    let ended = node_stopped["fields"]["tasks_ended"].as_u64().unwrap_or(0);
    assert!(ended >= 4, "{node_stopped}");

    // Every acknowledged write is there after a start on the same data directory.
    server.restart();
    let (mut events, mut items) = (0, 0);
    for written in &written {
        for id in &written.acknowledged {
            match written.titles.get(id) {
                None => {
                    let event = server.stored_event(id);
                    assert_eq!(event["id"], id.as_str(), "{event}");
                    events += 1;
                }
                Some(title) => {
                    let reply = server.admin_get(&item_path("items", id));
                    let item = assert_status(&reply, 200, &format!("acknowledged item {id}"));
                    assert_eq!(item["title"], title.as_str(), "{item}");
                    items += 1;
                }
            }
        }
    }
    assert!(
        events >= ACKED_BEFORE_STOP && items >= ACKED_BEFORE_STOP,
        "{events} events, {items} items"
    );
}
