//! `POST /chat` against the real binary, on a catalog built from MovieLens
//! (`../shared/data/movielens_latest_small/movies.csv`): title → `name`, genres →
//! `groups`, plus a synthetic `price`, `currency` and `availability` derived from the
//! movie id (`common::movielens`), so every expectation below is computed from the same rules.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::common::movielens::{movies, wait_until_searchable, Movie};
use crate::common::*;

const CHAT: &str = "/chat";

/// Loads the catalog into the server and waits until search finds its last movie.
fn load_catalog(server: &TestServer) -> HashMap<String, Movie> {
    let movies = movies();
    assert!(movies.len() > 9_000, "movies.csv has {} movies", movies.len());
    for chunk in movies.chunks(2_000) {
        let rows: Vec<Value> = chunk.iter().map(|(row, _, _)| row.clone()).collect();
        let reply = server.admin_put(ITEMS, Value::Array(rows));
        let body = assert_status(&reply, 200, "bulk upsert of movies");
        assert_eq!(body["upserted"], chunk.len(), "every movie upserted: {body}");
    }
    wait_searchable(server, &movies);
    movies
        .into_iter()
        .map(|(_, id, movie)| (id.to_string(), movie))
        .collect()
}

/// Search is fed near-real-time: wait until the last movie loaded is found.
fn wait_searchable(server: &TestServer, movies: &[(Value, u64, Movie)]) {
    let (_, id, movie) = movies.last().expect("movies");
    wait_until_searchable(server, &movie.title, &id.to_string());
}

fn chat(server: &TestServer, body: Value) -> Value {
    let reply = server.admin_post(CHAT, body.clone());
    assert_status(&reply, 200, &format!("chat {body}")).clone()
}

fn items(reply: &Value) -> &Vec<Value> {
    reply["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items array in {reply}"))
}

fn movie<'a>(catalog: &'a HashMap<String, Movie>, item: &Value) -> &'a Movie {
    let id = item["item_id"].as_str().unwrap_or_else(|| panic!("item_id in {item}"));
    catalog
        .get(id)
        .unwrap_or_else(|| panic!("item {id} is not a loaded movie"))
}

fn prices(catalog: &HashMap<String, Movie>, reply: &Value) -> Vec<f64> {
    items(reply).iter().map(|item| movie(catalog, item).price).collect()
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() % 2 {
        0 => ((sorted[middle - 1] + sorted[middle]) / 2.0 * 100.0).round() / 100.0,
        _ => sorted[middle],
    }
}

/// Every item: Comedy (and Children when `kids`), price under `ceiling`.
#[track_caller]
fn assert_all(catalog: &HashMap<String, Movie>, reply: &Value, ceiling: f64, kids: bool, context: &str) {
    assert!(!items(reply).is_empty(), "{context}: no items in {reply}");
    for item in items(reply) {
        let movie = movie(catalog, item);
        assert!(
            movie.genres.iter().any(|g| g == "Comedy"),
            "{context}: not a comedy: {movie:?}"
        );
        assert!(movie.price < ceiling, "{context}: {movie:?} is not under {ceiling}");
        if kids {
            assert!(
                movie.genres.iter().any(|g| g == "Children"),
                "{context}: not for kids: {movie:?}"
            );
        }
    }
}

#[test]
fn a_conversation_carries_price_and_genre_across_turns() {
    let server = TestServer::start();
    let catalog = load_catalog(&server);

    let first = chat(&server, json!({"message": "comedies under 10"}));
    let id = first["conversation_id"].as_str().expect("a conversation_id").to_owned();
    assert!(!id.is_empty());
    assert_eq!(items(&first).len(), 4, "limit defaults to 4: {first}");
    assert_all(&catalog, &first, 10.0, false, "turn 1");
    let reply = first["message"].as_str().expect("a reply");
    assert!(reply.contains("4 comedies") && reply.contains("under 10"), "{reply}");

    let cheaper = chat(&server, json!({"message": "cheaper", "conversation_id": id}));
    assert_eq!(cheaper["conversation_id"], id.as_str(), "the id is kept");
    let ceiling = median(&prices(&catalog, &first));
    assert!(ceiling < 10.0);
    assert_all(&catalog, &cheaper, ceiling, false, "turn 2 (cheaper)");
    let reply = cheaper["message"].as_str().unwrap();
    assert!(reply.contains("cheaper") && reply.contains("comedies"), "{reply}");

    let kids = chat(&server, json!({"message": "for kids", "conversation_id": id}));
    assert_all(&catalog, &kids, ceiling, true, "turn 3 (for kids)");
    let reply = kids["message"].as_str().unwrap();
    assert!(reply.contains("for kids"), "{reply}");

    // A free-text turn replaces the query and keeps the genre and the ceiling in force.
    let other = chat(&server, json!({"message": "comedies under 10"}));
    let other_id = other["conversation_id"].as_str().unwrap();
    assert_ne!(other_id, id, "a new conversation gets a new id");
    let love = chat(
        &server,
        json!({"message": "something with love in it", "conversation_id": other_id}),
    );
    assert_all(&catalog, &love, 10.0, false, "love");
    let first_title = movie(&catalog, &items(&love)[0]).title.to_lowercase();
    assert!(
        first_title.contains("love"),
        "the best match is about love: {first_title}"
    );
    assert!(love["message"].as_str().unwrap().contains("\"love\""), "{love}");

    // "any price" lifts the ceiling, the genre stays.
    let any = chat(
        &server,
        json!({"message": "any price, any age", "conversation_id": id, "limit": 50}),
    );
    assert_all(&catalog, &any, f64::INFINITY, false, "turn 5 (any price)");
    assert!(
        prices(&catalog, &any).iter().any(|price| *price >= ceiling),
        "the ceiling is gone: {any}"
    );
}

#[test]
fn ids_limits_item_shape_and_empty_answers() {
    let server = TestServer::start();
    let catalog = load_catalog(&server);

    // An unknown id starts a conversation with that id, which then carries on.
    let own = "my-own-conversation-42";
    let first = chat(
        &server,
        json!({"message": "thrillers under 20", "conversation_id": own, "limit": 7}),
    );
    assert_eq!(first["conversation_id"], own);
    assert_eq!(items(&first).len(), 7, "limit honoured");
    let second = chat(
        &server,
        json!({"message": "cheaper", "conversation_id": own, "limit": 1}),
    );
    assert_eq!(items(&second).len(), 1, "limit honoured");
    let ceiling = median(&prices(&catalog, &first));
    let movie_2 = movie(&catalog, &items(&second)[0]);
    assert!(
        movie_2.genres.iter().any(|g| g == "Thriller") && movie_2.price < ceiling,
        "{movie_2:?}"
    );

    // Two new conversations get two different ids.
    let a = chat(&server, json!({"message": "dramas"}));
    let b = chat(&server, json!({"message": "dramas"}));
    assert_ne!(a["conversation_id"], b["conversation_id"]);

    // The item shape: strings only, status and price from the row.
    let many = chat(&server, json!({"message": "comedies", "limit": 50}));
    assert_eq!(items(&many).len(), 50);
    let mut statuses = Vec::new();
    for item in items(&many) {
        let object = item.as_object().expect("an item object");
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["description", "item_id", "price", "status", "title"], "{item}");
        assert!(object.values().all(Value::is_string), "every field is a string: {item}");
        let movie = movie(&catalog, item);
        assert_eq!(item["title"], movie.title.as_str());
        assert_eq!(item["status"], movie.status, "{item}");
        let price = match movie.currency {
            Some(currency) => format!("{:.2} {currency}", movie.price),
            None => format!("{:.2}", movie.price),
        };
        assert_eq!(item["price"], price.as_str(), "{item}");
        statuses.push(movie.status);
    }
    assert!(
        statuses.contains(&"available") && statuses.contains(&"unknown"),
        "{statuses:?}"
    );

    // An unavailable movie is still found, after every available one.
    let (id, goldeneye) = catalog
        .iter()
        .find(|(_, movie)| movie.title == "GoldenEye (1995)")
        .expect("GoldenEye is in movies.csv");
    assert_eq!(goldeneye.status, "unavailable");
    let reply = chat(&server, json!({"message": "GoldenEye", "limit": 50}));
    let listed = items(&reply);
    let position = listed
        .iter()
        .position(|item| item["item_id"] == id.as_str())
        .unwrap_or_else(|| panic!("GoldenEye not found: {reply}"));
    assert_eq!(listed[position]["status"], "unavailable");
    assert!(
        listed[position..].iter().all(|item| item["status"] == "unavailable"),
        "unavailable items come last: {reply}"
    );

    // Nothing matches: no items, and the reply says what to relax.
    let none = chat(&server, json!({"message": "comedies under 0.50"}));
    assert!(items(&none).is_empty(), "{none}");
    let reply = none["message"].as_str().unwrap();
    assert!(
        reply.contains("I found no comedies under 0.50") && reply.contains("Relax the price limit"),
        "{reply}"
    );

    // Request events shape this request and the reply says so.
    let romances: Vec<&String> = catalog
        .iter()
        .filter(|(_, m)| m.genres == ["Comedy", "Romance"])
        .map(|(id, _)| id)
        .take(5)
        .collect();
    // Fresh clicks: events as old as a session's half-life would no longer count.
    let now = chrono::Utc::now().to_rfc3339();
    let events: Vec<Value> = romances
        .iter()
        .map(|id| json!({"timestamp": now, "type": "click", "item_id": id}))
        .collect();
    let shaped = chat(&server, json!({"message": "romantic comedies", "events": events}));
    assert!(
        shaped["message"].as_str().unwrap().contains("recent interest in"),
        "{shaped}"
    );
}

#[test]
fn a_conversation_survives_passivation_and_restart() {
    let mut server = TestServer::start_with_env(&[("RANKSTREAM__CHAT__IDLE_TTL_MS", "200")]);
    let catalog = load_catalog(&server);
    let id = "survivor";
    let first = chat(&server, json!({"message": "comedies under 10", "conversation_id": id}));
    let ceiling = median(&prices(&catalog, &first));

    poll_until(Duration::from_secs(10), "the conversation to passivate", || {
        let stats = server.admin_get("/v1/admin/stats").1;
        match (
            &stats["chat"]["live_conversations"],
            &stats["chat"]["conversations_passivated"],
        ) {
            (live, passivated) if *live == 0 && passivated.as_u64() >= Some(1) => Ok(()),
            _ => Err(stats["chat"].to_string()),
        }
    });
    let second = chat(&server, json!({"message": "cheaper", "conversation_id": id}));
    assert_all(&catalog, &second, ceiling, false, "after passivation");
    let ceiling = median(&prices(&catalog, &second));

    server.restart();
    let movies = movies();
    wait_searchable(&server, &movies);
    let third = chat(&server, json!({"message": "cheaper", "conversation_id": id}));
    assert_eq!(third["conversation_id"], id);
    assert_all(&catalog, &third, ceiling, false, "after a restart");
    let stats = server.admin_get("/v1/admin/stats").1;
    assert_eq!(stats["chat"]["conversations_restored"], 1, "{stats}");
}

/// What the stand-in LLM does with a request.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Answer,
    Fail,
    Stall,
}

/// A tiny OpenAI-compatible endpoint on 127.0.0.1 (the real service is external):
/// answers `POST /v1/chat/completions` per `mode` (a request with a `response_format`
/// gets `reading` as its content, any other a fixed reply), and keeps what it received.
struct StandIn {
    url: String,
    mode: Arc<Mutex<Mode>>,
    reading: Arc<Mutex<String>>,
    received: Arc<Mutex<Vec<(String, String, Value)>>>,
    calls: Arc<AtomicUsize>,
}

impl StandIn {
    fn start() -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in");
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let stand_in = StandIn {
            url,
            mode: Arc::new(Mutex::new(Mode::Answer)),
            reading: Arc::new(Mutex::new(String::new())),
            received: Arc::new(Mutex::new(Vec::new())),
            calls: Arc::new(AtomicUsize::new(0)),
        };
        let (mode, reading, received, calls) = (
            stand_in.mode.clone(),
            stand_in.reading.clone(),
            stand_in.received.clone(),
            stand_in.calls.clone(),
        );
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (mode, reading, received, calls) = (mode.clone(), reading.clone(), received.clone(), calls.clone());
                thread::spawn(move || {
                    let reading = reading.lock().unwrap().clone();
                    serve_one(stream, *mode.lock().unwrap(), &reading, &received, &calls)
                });
            }
        });
        stand_in
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    /// What it answers to a structured-output request, as the message content.
    fn read_as(&self, content: &str) {
        *self.reading.lock().unwrap() = content.to_owned();
    }

    /// The requests received with (`structured`) or without a `response_format`.
    fn requests(&self, structured: bool) -> Vec<(String, String, Value)> {
        let received = self.received.lock().unwrap();
        received
            .iter()
            .filter(|(_, _, body)| body.get("response_format").is_some() == structured)
            .cloned()
            .collect()
    }
}

/// A structured-output answer: every key of the schema, with `set` over the empty values.
fn reading(set: Value) -> String {
    let mut answer = json!({
        "groups": [], "excluded_groups": [], "tags": [], "excluded_tags": [], "min_price": null,
        "max_price": null, "cheaper": false, "pricier": false, "audience": null, "language": null,
        "year_from": null, "year_to": null, "terms": [], "reference": null, "ask": null, "more": false,
        "like_title": null, "like_reference": null, "reset": false
    });
    for (key, value) in set.as_object().expect("an object") {
        answer[key] = value.clone();
    }
    answer.to_string()
}

fn serve_one(
    stream: TcpStream,
    mode: Mode,
    reading: &str,
    received: &Mutex<Vec<(String, String, Value)>>,
    calls: &AtomicUsize,
) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let mut request_line = String::new();
    reader.read_line(&mut request_line).expect("request line");
    let mut length = 0;
    let mut authorization = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("header line");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').expect("a header");
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().expect("a length"),
            "authorization" => authorization = value.trim().to_owned(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("the body");
    calls.fetch_add(1, Ordering::SeqCst);
    let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let content = match body.get("response_format") {
        Some(_) => reading,
        None => "The stand-in LLM recommends these.",
    };
    received.lock().unwrap().push((path, authorization, body));
    let (status, answer) = match mode {
        Mode::Answer => (
            "200 OK",
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}).to_string(),
        ),
        Mode::Fail => ("500 Internal Server Error", "{\"error\": \"down\"}".to_owned()),
        Mode::Stall => {
            thread::sleep(Duration::from_secs(3));
            ("200 OK", "{}".to_owned())
        }
    };
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    );
}

#[test]
fn an_llm_reads_messages_writes_replies_and_its_failures_fall_back() {
    let stand_in = StandIn::start();
    let server = TestServer::start_with_env(&[
        ("RANKSTREAM__CHAT__LLM_URL", &stand_in.url),
        ("RANKSTREAM__CHAT__LLM_MODEL", "tiny-test-model"),
        ("RANKSTREAM__CHAT__LLM_API_KEY_ENV", "CHAT_TEST_LLM_KEY"),
        ("CHAT_TEST_LLM_KEY", "llm-secret"),
        ("RANKSTREAM__CHAT__LLM_TIMEOUT_MS", "500"),
    ]);
    let catalog = load_catalog(&server);

    // The LLM reads the message (structured output) and writes the reply.
    stand_in.read_as(&reading(json!({"groups": ["Comedy"], "max_price": 9.99})));
    let answered = chat(&server, json!({"message": "comedies under 10"}));
    assert_eq!(answered["message"], "The stand-in LLM recommends these.");
    assert_all(&catalog, &answered, 10.0, false, "with an llm");
    assert_eq!(
        answered["constraints"]["max_price"]["amount"], 9.99,
        "the llm's reading: {answered}"
    );
    let (path, _, read) = stand_in.requests(true)[0].clone();
    assert_eq!(path, "/v1/chat/completions");
    assert_eq!(read["response_format"]["type"], "json_schema");
    assert_eq!(read["response_format"]["json_schema"]["schema"]["type"], "object");
    assert_eq!(read["messages"][1]["content"], "comedies under 10");
    let instructions = read["messages"][0]["content"].as_str().expect("instructions");
    assert!(
        instructions.contains("Comedy") && instructions.contains("Sci-Fi"),
        "{instructions}"
    );
    let (path, authorization, request) = stand_in.requests(false)[0].clone();
    assert_eq!(path, "/v1/chat/completions");
    assert_eq!(authorization, "Bearer llm-secret");
    assert_eq!(request["model"], "tiny-test-model");
    let system = request["messages"][0]["content"].as_str().expect("a system prompt");
    assert_eq!(request["messages"][0]["role"], "system");
    assert_eq!(
        request["messages"][1],
        json!({"role": "user", "content": "comedies under 10"})
    );
    for item in items(&answered) {
        let title = &movie(&catalog, item).title;
        assert!(system.contains(title.as_str()), "the prompt lists {title}: {system}");
    }
    assert!(
        system.contains("4 comedies up to 9.99"),
        "the prompt states the constraints: {system}"
    );

    let id = answered["conversation_id"].as_str().unwrap();
    stand_in.set(Mode::Fail);
    let failed = chat(&server, json!({"message": "cheaper", "conversation_id": id}));
    let reply = failed["message"].as_str().unwrap();
    assert!(reply.contains("Here are 4 comedies"), "the composed reply: {reply}");
    assert_all(
        &catalog,
        &failed,
        median(&prices(&catalog, &answered)),
        false,
        "llm failed",
    );

    stand_in.set(Mode::Stall);
    let started = std::time::Instant::now();
    let stalled = chat(&server, json!({"message": "thrillers"}));
    assert!(
        stalled["message"].as_str().unwrap().starts_with("Here are 4 thrillers"),
        "{stalled}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(2_500),
        "the timeout cut the wait"
    );

    // What the rules cannot read, the LLM can; names the catalog lacks are dropped.
    stand_in.set(Mode::Answer);
    stand_in.read_as(&reading(json!({
        "groups": ["Comedy", "Grandma Films"], "excluded_groups": ["Romance"], "max_price": 10
    })));
    let read = chat(
        &server,
        json!({"message": "flicks that would make my grandma laugh, nothing mushy, ten bucks tops"}),
    );
    assert_eq!(
        read["constraints"],
        json!({"groups": ["Comedy"], "excluded_groups": ["Romance"], "max_price": {"amount": 10.0, "inclusive": true}})
    );
    assert_all(&catalog, &read, 10.01, false, "read by the llm");
    for item in items(&read) {
        assert!(!movie(&catalog, item).genres.iter().any(|g| g == "Romance"), "{read}");
    }
    // An answer that is not the schema's object: the rules read the message.
    stand_in.read_as("I think they want comedies");
    let ruled = chat(&server, json!({"message": "thrillers under 5"}));
    assert_eq!(ruled["constraints"]["groups"], json!(["Thriller"]), "{ruled}");
    assert_eq!(
        ruled["constraints"]["max_price"],
        json!({"amount": 5.0, "inclusive": false})
    );

    let stats = server.admin_get("/v1/admin/stats").1;
    assert_eq!(stats["chat"]["llm_replies"], 3, "{stats}");
    assert_eq!(stats["chat"]["llm_failures"], 2, "{stats}");
    assert_eq!(stats["chat"]["llm_extractions"], 2, "{stats}");
    assert_eq!(stats["chat"]["llm_extraction_failures"], 3, "{stats}");
    assert_eq!(stand_in.calls.load(Ordering::SeqCst), 10);
}

/// With MiniLM, words neither the rules nor the synonym table know name the catalog's
/// own genres by meaning; without it (the default hashed embedder), they stay words.
#[test]
fn words_are_read_by_meaning_with_minilm() {
    let server = TestServer::start_with_env(&[("RANKSTREAM__EMBED__MODEL_DIR", &minilm_dir())]);
    let catalog = load_catalog(&server);
    for (message, key, genre) in [
        ("movies with jokes", "groups", "Comedy"),
        ("something with singing", "groups", "Musical"),
        ("something with soldiers", "groups", "War"),
        ("comedies, no murder please", "excluded_groups", "Crime"),
    ] {
        let reply = chat(&server, json!({"message": message}));
        let constraints = &reply["constraints"];
        assert!(
            constraints[key]
                .as_array()
                .is_some_and(|names| names.contains(&json!(genre))),
            "{message}: {reply}"
        );
        assert!(
            constraints.get("query").is_none(),
            "{message}: no words left to search: {reply}"
        );
        assert!(!items(&reply).is_empty(), "{message}: {reply}");
        for item in items(&reply) {
            let has_genre = movie(&catalog, item).genres.iter().any(|g| g == genre);
            assert_eq!(has_genre, key == "groups", "{message}: {item} in {reply}");
        }
    }
    let plain = TestServer::start();
    load_catalog(&plain);
    let reply = chat(&plain, json!({"message": "movies with jokes"}));
    assert_eq!(reply["constraints"], json!({"query": ["jokes"]}), "{reply}");
}

/// The labels' meanings follow the catalog: a group added after the first readings is
/// named by meaning too, and the labels read before still are.
#[test]
fn labels_added_later_are_read_by_meaning_too() {
    let server = TestServer::start_with_env(&[("RANKSTREAM__EMBED__MODEL_DIR", &minilm_dir())]);
    let upsert = |rows: Value| assert_status(&server.admin_put(ITEMS, rows), 200, "upsert").clone();
    upsert(json!([
        {"id": "1", "title": "The Trench", "groups": ["War"]},
        {"id": "2", "title": "Laughing Matters", "groups": ["Comedy"]},
    ]));
    let constraints = |message: &str| chat(&server, json!({"message": message}))["constraints"].clone();
    let read_as = |message: &str, expected: Value| {
        poll_every(Duration::from_millis(50), Duration::from_secs(30), message, || {
            let read = constraints(message);
            (read == expected).then_some(()).ok_or(read.to_string())
        })
    };
    read_as("something with soldiers", json!({"groups": ["War"]}));
    assert_eq!(constraints("something with recipes"), json!({"query": ["recipes"]}));

    upsert(json!([{"id": "3", "title": "The Kitchen", "groups": ["Cooking"]}]));
    read_as("something with recipes", json!({"groups": ["Cooking"]}));
    assert_eq!(constraints("something with soldiers"), json!({"groups": ["War"]}));
}

#[test]
fn invalid_requests_are_refused() {
    let server = TestServer::start();
    let long = "a".repeat(5_000);
    let invalid = [
        json!({}),
        json!({"message": null}),
        json!({"message": 42}),
        json!({"message": ""}),
        json!({"message": "   "}),
        json!({"message": long}),
        json!({"message": "hi", "conversation_id": ""}),
        json!({"message": "hi", "conversation_id": 7}),
        json!({"message": "hi", "session_id": 7}),
        json!({"message": "hi", "user_id": ""}),
        json!({"message": "hi", "events": "click"}),
        json!({"message": "hi", "events": [{"type": "click"}]}),
        json!({"message": "hi", "events": [{"timestamp": "yesterday", "type": "click"}]}),
        json!({"message": "hi", "limit": 0}),
        json!({"message": "hi", "limit": 51}),
        json!({"message": "hi", "limit": -1}),
        json!({"message": "hi", "limit": 2.5}),
        json!({"message": "hi", "limit": "4"}),
        json!(["message"]),
    ];
    for body in invalid {
        let reply = server.admin_post(CHAT, body.clone());
        assert_error(&reply, 422, "validation_error", &format!("chat {body}"));
    }
    let malformed = server.raw(
        Method::POST,
        CHAT,
        &server.admin_key,
        b"{\"message\": ",
        "application/json",
    );
    assert_error(&malformed, 400, "malformed_json", "malformed chat body");

    let body = json!({"message": "hello"});
    let anonymous = server.send(Method::POST, CHAT, Auth::None, Payload::Json(body.clone()), &[]);
    assert_eq!(anonymous.status, 401);
    let search_only = server.create_key(&["search"], json!({}));
    assert_error(
        &server.post(CHAT, &search_only, body.clone()),
        403,
        "forbidden",
        "chat without the scope",
    );
    let chat_key = server.create_key(&["chat"], json!({}));
    let reply = server.post(CHAT, &chat_key, body.clone());
    let answer = assert_status(&reply, 200, "chat with the chat scope");
    assert!(items(answer).is_empty(), "an empty catalog has nothing: {answer}");
    assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()));
    let versioned = server.post("/v1/chat", &chat_key, body);
    assert_status(&versioned, 200, "/v1/chat is served too");
}
