//! Crash safety of event ingest: clients keep posting while the server is
//! SIGKILLed; after a restart every acknowledged event is stored and applied
//! exactly once to its user and session state.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use reqwest::blocking::Client;

const THREADS: usize = 3;
const USERS_PER_THREAD: usize = 64;
/// Per-user budget; keeps every key under the 100 entries of `event_ids`.
const MAX_PER_USER: usize = 80;
const KILL_AFTER: Duration = Duration::from_millis(1500);

/// What one client thread saw. Keys are `user:UID` / `session:SID`.
#[derive(Default)]
struct Outcome {
    /// Ids acknowledged with a complete 202, per key.
    acked: HashMap<String, Vec<String>>,
    /// Ids of a request that failed after the kill in a way that may have
    /// reached the server (not a refused connection), per key.
    uncertain: HashMap<String, Vec<String>>,
    /// Failures seen while the server was supposed to be up.
    errors: Vec<String>,
}

fn keys_of(event: &Value) -> Vec<String> {
    let mut keys = vec![format!("user:{}", event["uid"].as_str().unwrap())];
    if let Some(sid) = event["sid"].as_str() {
        keys.push(format!("session:{sid}"));
    }
    keys
}

fn record(map: &mut HashMap<String, Vec<String>>, events: &[Value]) {
    for event in events {
        for key in keys_of(event) {
            map.entry(key)
                .or_default()
                .push(event["id"].as_str().unwrap().to_string());
        }
    }
}

/// Posts single events and bulks of 2-4 until the first failure or until the budget is used up.
fn post_until_failure(
    thread_no: usize,
    url: String,
    key: String,
    killed: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
) -> Outcome {
    let client = Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut outcome = Outcome::default();
    let mut per_user = [0usize; USERS_PER_THREAD];
    let mut n = 0;
    for request in 0.. {
        let mut events = vec![];
        for _ in 0..1 + request % 4 {
            let user = n % USERS_PER_THREAD;
            if per_user[user] == MAX_PER_USER {
                break;
            }
            per_user[user] += 1;
            let mut event = json!({
                "id": format!("c{thread_no}-{n}"), "type": "click", "original_timestamp": rfc3339_ms(now()),
                "uid": format!("c{thread_no}-u{user}"), "item_id": format!("it-{n}"), "click_type": "tile",
            });
            // Every other round of users also carries the user's own session.
            if (n / USERS_PER_THREAD).is_multiple_of(2) {
                event["sid"] = json!(format!("c{thread_no}-s{user}"));
            }
            events.push(event);
            n += 1;
        }
        if events.is_empty() {
            return outcome;
        }
        let body = match events.as_slice() {
            [one] => one.clone(),
            _ => json!({"events": events}),
        };
        let sent_ids: Vec<Value> = events.iter().map(|event| event["id"].clone()).collect();
        let result = client.post(&url).bearer_auth(&key).json(&body).send();
        let (failure, maybe_stored) = match result {
            Err(error) => (format!("{error:?}"), !error.is_connect()),
            Ok(response) => {
                let status = response.status();
                match response.json::<Value>() {
                    Ok(reply) if status == 202 && reply["ids"] == json!(sent_ids) && reply["duplicates"] == 0 => {
                        record(&mut outcome.acked, &events);
                        acked.fetch_add(events.len(), Ordering::SeqCst);
                        continue;
                    }
                    Ok(reply) => (format!("{status}: {reply} for {body}"), true),
                    Err(error) => (format!("{status}, body: {error:?}"), true),
                }
            }
        };
        if killed.load(Ordering::SeqCst) {
            if maybe_stored {
                record(&mut outcome.uncertain, &events);
            }
        } else {
            outcome.errors.push(failure);
        }
        return outcome;
    }
    unreachable!()
}

#[test]
fn acknowledged_events_survive_sigkill() {
    // Thousands of requests: lift the per-key quota (default 1000/s).
    let mut server = TestServer::start_with_env(&[
        ("RANKSTREAM__AUTH__DEFAULT_RATE_PER_SEC", "1000000"),
        ("RANKSTREAM__AUTH__DEFAULT_BURST", "1000000"),
    ]);
    let killed = Arc::new(AtomicBool::new(false));
    let acked_count = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..THREADS)
        .map(|thread_no| {
            let (url, key) = (format!("{}{EVENTS}", server.base_url), server.admin_key.clone());
            let (killed, acked, finished) = (killed.clone(), acked_count.clone(), finished.clone());
            thread::spawn(move || {
                let outcome = post_until_failure(thread_no, url, key, killed, acked);
                finished.fetch_add(1, Ordering::SeqCst);
                outcome
            })
        })
        .collect();

    // Kill after ~1.5 s, or earlier if half the budget is acknowledged already,
    // so the clients are still posting when the server dies.
    let started = Instant::now();
    poll_until(Duration::from_secs(120), "clients to post events", || {
        let acked = acked_count.load(Ordering::SeqCst);
        let budget = THREADS * USERS_PER_THREAD * MAX_PER_USER;
        let done = finished.load(Ordering::SeqCst) > 0;
        if done || acked * 2 >= budget || (acked >= 20 && started.elapsed() >= KILL_AFTER) {
            Ok(())
        } else {
            Err(format!("{acked} acknowledged"))
        }
    });
    killed.store(true, Ordering::SeqCst);
    let still_posting = finished.load(Ordering::SeqCst) == 0;
    server.kill();

    let mut acked: HashMap<String, Vec<String>> = HashMap::new();
    let mut uncertain: HashMap<String, Vec<String>> = HashMap::new();
    for client in clients {
        let outcome = client.join().expect("client thread panicked");
        assert!(
            outcome.errors.is_empty(),
            "failures before the kill: {:?}",
            outcome.errors
        );
        acked.extend(outcome.acked);
        uncertain.extend(outcome.uncertain);
    }
    assert!(still_posting, "a client stopped before the kill");
    let acked_ids: HashSet<&String> = acked.values().flatten().collect();
    assert!(acked_ids.len() >= 20, "only {} events acknowledged", acked_ids.len());
    eprintln!(
        "{} events acknowledged, keys with an unacknowledged request in flight: {:?}",
        acked_ids.len(),
        uncertain.keys().collect::<Vec<_>>()
    );

    server.restart();
    for id in &acked_ids {
        assert_eq!(server.stored_event(id)["id"], id.as_str(), "acknowledged event {id}");
    }
    let mut keys: Vec<&String> = acked.keys().chain(uncertain.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let path = match key.split_once(':').unwrap() {
            ("user", uid) => user_state_path(uid),
            (_, sid) => session_path(sid),
        };
        let sure: HashSet<&String> = acked.get(key).into_iter().flatten().collect();
        let maybe: HashSet<&String> = uncertain.get(key).into_iter().flatten().collect();
        let reply = server.admin_get(&path);
        if sure.is_empty() && reply.0 == 404 {
            continue;
        }
        let state = assert_status(&reply, 200, &path);
        let count = state["event_count"]
            .as_u64()
            .unwrap_or_else(|| panic!("{path}: {state}")) as usize;
        let ids = strings(state, "event_ids");
        let distinct: HashSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len(), "{path}: an event applied twice: {ids:?}");
        assert_eq!(ids.len(), count, "{path}: event_ids vs event_count in {state}");
        assert!(
            sure.len() <= count && count <= sure.len() + maybe.len(),
            "{path}: event_count {count}, acknowledged {}, in flight {}",
            sure.len(),
            maybe.len()
        );
        let missing: Vec<_> = sure.iter().filter(|id| !distinct.contains(**id)).collect();
        assert!(missing.is_empty(), "{path}: acknowledged ids missing: {missing:?}");
        let foreign: Vec<_> = ids
            .iter()
            .filter(|id| !sure.contains(id) && !maybe.contains(id))
            .collect();
        assert!(foreign.is_empty(), "{path}: ids never sent for this key: {foreign:?}");
    }

    // Ingest continues on the recovered state.
    let before = server.user_state("c0-u0")["event_count"].as_u64().unwrap();
    let body = json!({"type": "scroll", "uid": "c0-u0", "original_timestamp": rfc3339_ms(now())});
    server.ingest_ok(body);
    assert_eq!(server.user_state("c0-u0")["event_count"], before + 1);
}
