//! `POST /v1/search` and `POST /v1/search/rerank` on a real catalog: the MovieLens
//! (latest-small) movies, title → `name`, genres → `groups`, loaded through the
//! bulk catalog endpoint of the real binary.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::*;

const SEARCH: &str = "/v1/search";
const RERANK: &str = "/v1/search/rerank";
const TABLE_NAME: &str = "movies";
const MOVIES_CSV: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/data/movielens_latest_small/movies.csv"
);
/// The SPEC's bound on how long a catalog write may take to reach search.
const FRESHNESS: Duration = Duration::from_secs(1);

struct Movie {
    id: String,
    title: String,
    genres: Vec<String>,
}

fn movies() -> Vec<Movie> {
    let mut reader = csv::Reader::from_path(MOVIES_CSV)
        .unwrap_or_else(|error| panic!("cannot read {MOVIES_CSV} (the shared MovieLens data): {error}"));
    reader
        .records()
        .map(|record| {
            let record = record.expect("a movies.csv record");
            Movie {
                id: record[0].to_string(),
                title: record[1].to_string(),
                genres: record[2]
                    .split('|')
                    .filter(|genre| *genre != "(no genres listed)")
                    .map(str::to_string)
                    .collect(),
            }
        })
        .collect()
}

fn movie_row(movie: &Movie) -> Value {
    let mut row = json!({"id": movie.id, "_table": TABLE_NAME, "name": movie.title});
    if !movie.genres.is_empty() {
        row["groups"] = json!(movie.genres);
    }
    row
}

/// A server with the whole MovieLens catalog indexed, a key with the `search` scope
/// and the movies by id.
struct Catalog {
    server: TestServer,
    key: String,
    movies: Vec<Movie>,
    genres: HashMap<String, Vec<String>>,
}

impl Catalog {
    fn load() -> Catalog {
        Catalog::load_first(usize::MAX)
    }

    fn load_first(count: usize) -> Catalog {
        Catalog::load_into(TestServer::start(), count)
    }

    fn load_into(server: TestServer, count: usize) -> Catalog {
        let movies: Vec<Movie> = movies().into_iter().take(count).collect();
        for chunk in movies.chunks(2_000) {
            let rows: Vec<Value> = chunk.iter().map(movie_row).collect();
            let reply = server.admin_put(ITEMS, Value::Array(rows));
            let body = assert_status(&reply, 200, "bulk upsert of movies");
            assert_eq!(body["upserted"], chunk.len(), "every movie stored: {body}");
        }
        let key = server.create_key(&["search"], json!({"name": "searcher"}));
        let genres = movies.iter().map(|m| (m.id.clone(), m.genres.clone())).collect();
        let catalog = Catalog {
            server,
            key,
            movies,
            genres,
        };
        catalog.wait_until_indexed();
        catalog
    }

    /// Polls until a sample of titles spread over the catalog is found first.
    fn wait_until_indexed(&self) {
        let step = (self.movies.len() / 7).max(1);
        let samples: Vec<&Movie> = self.movies.iter().step_by(step).chain(self.movies.last()).collect();
        for movie in samples {
            wait_for(Duration::from_secs(30), &format!("{:?} indexed", movie.title), || {
                self.search_ids(json!({"query": movie.title, "limit": 50}))
                    .contains(&movie.id)
            });
        }
    }

    fn search(&self, body: Value) -> Value {
        let reply = self.server.post(SEARCH, &self.key, body.clone());
        assert_status(&reply, 200, &format!("search {body}")).clone()
    }

    fn search_ids(&self, body: Value) -> Vec<String> {
        ids(&self.search(body))
    }

    fn rerank(&self, body: Value) -> Vec<String> {
        let reply = self.server.post(RERANK, &self.key, body.clone());
        ids(assert_status(&reply, 200, &format!("rerank {body}")))
    }

    fn has_genre(&self, id: &str, genre: &str) -> bool {
        self.genres
            .get(id)
            .is_some_and(|genres| genres.iter().any(|g| g == genre))
    }

    fn count_genre(&self, ids: &[String], genre: &str) -> usize {
        ids.iter().filter(|id| self.has_genre(id, genre)).count()
    }

    /// Movies of `genre` but not of `not_genre` whose titles do not contain `avoid`.
    fn of_genre(&self, genre: &str, not_genre: &str, avoid: &str, count: usize) -> Vec<String> {
        let has = |m: &Movie, genre: &str| m.genres.iter().any(|g| g == genre);
        self.movies
            .iter()
            .filter(|m| has(m, genre) && !has(m, not_genre) && !m.title.to_lowercase().contains(avoid))
            .take(count)
            .map(|m| m.id.clone())
            .collect()
    }

    /// Clicks on `ids` in session `sid`; the 202 comes once the session applied them.
    fn click(&self, sid: &str, ids: &[String]) {
        let events: Vec<Value> = ids
            .iter()
            .map(|id| event("click", json!({"sid": sid, "item_id": id, "click_type": "select"})))
            .collect();
        let reply = self.server.admin_post(EVENTS, json!({ "events": events }));
        assert_ingested(&reply, ids.len(), 0, "clicks");
    }
}

fn ids(body: &Value) -> Vec<String> {
    body["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items array in {body}"))
        .iter()
        .map(|item| {
            item["id"]
                .as_str()
                .unwrap_or_else(|| panic!("item without id: {item}"))
                .to_string()
        })
        .collect()
}

/// Polls `condition` until it holds, failing after `timeout`; returns how long it took.
fn wait_for(timeout: Duration, what: &str, mut condition: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    loop {
        if condition() {
            return started.elapsed();
        }
        assert!(started.elapsed() < timeout, "not within {timeout:?}: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_title_finds_its_film_first_even_misspelt() {
    let catalog = Catalog::load();
    for (query, id) in [
        ("Toy Story", "1"),
        ("jumanji", "2"),
        ("The Matrix", "2571"),
        ("Forrest Gump", "356"),
        ("Pulp Fiction", "296"),
        // Misspelt: a swap, a missing letter, a wrong letter, an extra letter.
        ("Toy Stroy", "1"),
        ("jumaji", "2"),
        ("The Matirx", "2571"),
        ("Forest Gump", "356"),
        ("Pulp Fictionn", "296"),
        ("Shawshank Redemtion", "318"),
        // An audience word in a title is the title's, not a filter for children's films.
        ("Child's Play", "1991"),
        ("spy kids", "4232"),
    ] {
        let body = catalog.search(json!({ "query": query }));
        let found = ids(&body);
        assert_eq!(
            found.first().map(String::as_str),
            Some(id),
            "{query:?} found {:?}",
            &found[..found.len().min(5)]
        );
        let first = &body["items"][0];
        assert_eq!(first["item_id"], first["id"], "both key names: {first}");
        assert!(first["score"].is_number(), "{first}");
        let title = catalog.movies.iter().find(|m| m.id == id).unwrap().title.clone();
        assert_eq!(first["metadata"], json!({ "title": title }), "metadata of {id}");
    }
    let found = catalog.search_ids(json!({"query": "love"}));
    assert_eq!(found.len(), 50, "limit defaults to 50");
    assert_eq!(catalog.search_ids(json!({"query": "love", "limit": 7})).len(), 7);
    assert!(catalog.search_ids(json!({"query": "love", "limit": 0})).is_empty());
    assert!(
        catalog.search_ids(json!({"query": "qxzvwk"})).is_empty(),
        "nothing is close"
    );
}

/// With MiniLM, a word the catalog has nowhere, not even within a typo, names the
/// catalog's genres by meaning (as chat reads it); with the hashed embedder it finds nothing.
#[test]
fn a_word_the_catalog_lacks_is_read_by_meaning_with_minilm() {
    let minilm = TestServer::start_with_env(&[("RANKSTREAM__EMBED__MODEL_DIR", &minilm_dir())]);
    let catalog = Catalog::load_into(minilm, usize::MAX);
    let found = catalog.search_ids(json!({"query": "warfare", "limit": 10}));
    assert_eq!(found.len(), 10, "warfare: {found:?}");
    for id in &found {
        assert!(
            catalog.genres[id].iter().any(|genre| genre == "War"),
            "warfare: {id} {:?}",
            catalog.genres[id]
        );
    }
    // A word the catalog has within a typo stays text: no model run, the titles first.
    let found = catalog.search_ids(json!({"query": "sleuths", "limit": 3}));
    let titles: Vec<&str> = found
        .iter()
        .map(|id| catalog.movies.iter().find(|m| &m.id == id).unwrap().title.as_str())
        .collect();
    assert!(
        titles.first().is_some_and(|title| title.starts_with("Sleuth")),
        "{titles:?}"
    );

    let plain = Catalog::load_first(2_000);
    assert!(plain.search_ids(json!({"query": "warfare"})).is_empty());
}

#[test]
fn a_session_of_clicks_lifts_its_genre_for_an_ambiguous_query() {
    let catalog = Catalog::load();
    let query = json!({"query": "night", "limit": 10});
    let fresh = catalog.search_ids(json!({"query": "night", "limit": 10, "session_id": "fresh"}));
    assert_eq!(
        fresh,
        catalog.search_ids(query.clone()),
        "a session without state changes nothing"
    );
    let clicked = catalog.of_genre("Horror", "Comedy", "night", 6);
    catalog.click("horror-fan", &clicked);
    let personal = catalog.search_ids(json!({"query": "night", "limit": 10, "session_id": "horror-fan"}));
    let (before, after) = (
        catalog.count_genre(&fresh, "Horror"),
        catalog.count_genre(&personal, "Horror"),
    );
    assert!(
        after > before && after >= 5,
        "horror in the top 10 for \"night\": {before} without the session, {after} with it\n{fresh:?}\n{personal:?}"
    );
    // A specific title still wins over the session's taste.
    let toy = catalog.search_ids(json!({"query": "Toy Story", "session_id": "horror-fan"}));
    assert_eq!(toy[0], "1");
    // The user's state counts as well.
    let user_events: Vec<Value> = clicked
        .iter()
        .map(|id| {
            event(
                "click",
                json!({"uid": "u-horror", "item_id": id, "click_type": "select"}),
            )
        })
        .collect();
    assert_ingested(
        &catalog.server.admin_post(EVENTS, json!({ "events": user_events })),
        clicked.len(),
        0,
        "user clicks",
    );
    let by_user = catalog.search_ids(json!({"query": "night", "limit": 10, "user_id": "u-horror"}));
    assert!(catalog.count_genre(&by_user, "Horror") > before, "{by_user:?}");
}

#[test]
fn request_embedded_events_shape_that_request_only() {
    let catalog = Catalog::load();
    let baseline = catalog.search_ids(json!({"query": "night", "limit": 10, "session_id": "s-embedded"}));
    let now = rfc3339_ms(now());
    let events: Vec<Value> = catalog
        .of_genre("Horror", "Comedy", "night", 6)
        .iter()
        .map(|id| json!({"timestamp": now, "type": "click", "item_id": id, "description": "clicked"}))
        .collect();
    let shaped =
        catalog.search_ids(json!({"query": "night", "limit": 10, "session_id": "s-embedded", "events": events}));
    assert!(
        catalog.count_genre(&shaped, "Horror") > catalog.count_genre(&baseline, "Horror"),
        "embedded horror clicks lift horror: {baseline:?} vs {shaped:?}"
    );
    let after = catalog.search_ids(json!({"query": "night", "limit": 10, "session_id": "s-embedded"}));
    assert_eq!(after, baseline, "the embedded events were not stored");
    let (status, session) = catalog.server.admin_get(&session_path("s-embedded"));
    assert!(
        status == 404 || session["recent"].as_array().is_none_or(|r| r.is_empty()),
        "{session}"
    );
}

#[test]
fn writes_reach_search_within_a_second_and_deleted_items_never_return() {
    let catalog = Catalog::load_first(300);
    let server = &catalog.server;
    let find = |query: &str, id: &str| catalog.search_ids(json!({"query": query})).contains(&id.to_string());

    let reply = server.admin_put(
        ITEM,
        json!({"id": "new-1", "_table": TABLE_NAME, "name": "Zanzibar Nocturne", "groups": ["Drama"]}),
    );
    assert_status(&reply, 200, "upsert");
    let took = wait_for(FRESHNESS, "an upsert is searchable", || {
        find("zanzibar nocturne", "new-1")
    });
    println!("upsert searchable after {took:?}");

    let reply = server.admin_put(
        ITEM,
        json!({"id": "new-1", "_table": TABLE_NAME, "name": "Quokka Serenade"}),
    );
    assert_status(&reply, 200, "rename");
    wait_for(FRESHNESS, "a renamed item is found by its new name", || {
        find("quokka", "new-1")
    });
    assert!(
        !find("zanzibar", "new-1"),
        "the old name is gone with the commit that brought the new one"
    );

    // Soft delete: gone within a second, and never returned from the moment the delete answered.
    let reply = server.admin_delete(&item_path(TABLE_NAME, "new-1"));
    assert_status(&reply, 200, "soft delete");
    assert!(
        !find("quokka serenade", "new-1"),
        "a soft-deleted item is never returned"
    );
    let took = wait_for(FRESHNESS, "a soft delete leaves the index", || {
        let body = catalog.search(json!({"query": "quokka serenade"}));
        ids(&body).is_empty()
    });
    println!("soft delete gone after {took:?}");

    // Purge.
    assert!(find("Toy Story", "1"));
    let reply = server.admin_delete(&format!("{}?purge=true", item_path(TABLE_NAME, "1")));
    assert_status(&reply, 200, "purge");
    assert!(!find("Toy Story", "1"), "a purged item is never returned");
    wait_for(FRESHNESS, "a purge leaves the index", || {
        catalog
            .search_ids(json!({"query": "toy story (1995)", "limit": 1000}))
            .iter()
            .all(|id| id != "1")
    });

    // Upserted already deleted: never indexed.
    let reply = server.admin_put(
        ITEM,
        json!({"id": "new-2", "_table": TABLE_NAME, "name": "Wombat Requiem", "is_deleted": true}),
    );
    assert_status(&reply, 200, "upsert deleted");
    let reply = server.admin_put(
        ITEM,
        json!({"id": "new-3", "_table": TABLE_NAME, "name": "Wombat Rhapsody"}),
    );
    assert_status(&reply, 200, "upsert after");
    wait_for(FRESHNESS, "the later upsert is searchable", || find("wombat", "new-3"));
    assert!(!find("wombat requiem", "new-2"));

    // A dropped table leaves the index.
    let reply = server.admin_delete(&format!("{TABLE}/{TABLE_NAME}"));
    assert_status(&reply, 200, "drop table");
    wait_for(FRESHNESS, "a dropped table leaves the index", || {
        catalog.search_ids(json!({"query": "jumanji"})).is_empty()
    });
}

#[test]
fn the_index_is_rebuilt_after_a_restart_without_its_directory() {
    let mut catalog = Catalog::load_first(500);
    let reply = catalog.server.admin_delete(&item_path(TABLE_NAME, "2"));
    assert_status(&reply, 200, "soft delete jumanji");
    catalog.server.stop();
    let index_dir = catalog.server.data_path().join("search");
    assert!(index_dir.is_dir(), "the index lives in {}", index_dir.display());
    std::fs::remove_dir_all(&index_dir).unwrap();
    catalog.server.restart();
    // Ready means the rebuilt index answers: no waiting on search itself after /readyz.
    wait_for(Duration::from_secs(30), "/readyz to answer 200", || {
        catalog
            .server
            .send(Method::GET, "/readyz", Auth::None, Payload::Empty, &[])
            .pair()
            .0
            == 200
    });
    assert_eq!(
        catalog
            .search_ids(json!({"query": "Toy Story"}))
            .first()
            .map(String::as_str),
        Some("1"),
        "the index is usable once the node says it is ready"
    );
    catalog.wait_until_indexed();
    assert!(index_dir.is_dir(), "rebuilt in place");
    assert!(
        !catalog
            .search_ids(json!({"query": "jumanji", "limit": 1000}))
            .contains(&"2".to_string()),
        "the soft-deleted item stays out"
    );
    // A clean restart keeps the index as it is.
    catalog.server.restart();
    assert_eq!(catalog.search_ids(json!({"query": "Toy Story"}))[0], "1");
}

#[test]
fn rerank_follows_retrieval_metadata_when_nothing_else_speaks() {
    let catalog = Catalog::load_first(300);
    let given: Vec<String> = ["1", "2", "3", "unknown-a", "5", "6"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let scores = [0.2, 0.9, 0.5, 0.7, 0.1, 0.3];
    let metadata: Vec<Value> = given
        .iter()
        .zip(scores)
        .map(|(id, score)| json!({"item_id": id, "retrieval_score": score, "source": "bm25"}))
        .collect();
    // A query none of them matches; no user, no session; the default model.
    let body = json!({"query": "qxzvwk", "item_ids": given, "item_retrieval_metadata": metadata});
    assert_eq!(catalog.rerank(body.clone()), ["2", "unknown-a", "3", "6", "1", "5"]);
    let mut limited = body.clone();
    limited["limit"] = json!(2);
    assert_eq!(catalog.rerank(limited), ["2", "unknown-a"]);
    let mut named = body;
    named["model_id"] = json!("default");
    assert_eq!(catalog.rerank(named), ["2", "unknown-a", "3", "6", "1", "5"]);

    let ranked: Vec<Value> = ["6", "unknown-b", "1", "3"]
        .iter()
        .enumerate()
        .map(|(rank, id)| json!({"item_id": id, "rank": rank}))
        .collect();
    let body =
        json!({"query": "qxzvwk", "item_ids": ["1", "3", "6", "unknown-b", "2"], "item_retrieval_metadata": ranked});
    assert_eq!(
        catalog.rerank(body),
        ["6", "unknown-b", "1", "3", "2"],
        "by rank; none last"
    );
    let reply = catalog
        .server
        .post("/search/rerank", &catalog.key, json!({"query": "x", "item_ids": ["1"]}));
    assert_status(&reply, 200, "the unversioned path");
    let reply = catalog
        .server
        .post(RERANK, &catalog.key, json!({"query": "x", "item_ids": ["1", "2", "3"]}));
    let body = assert_status(&reply, 200, "no metadata");
    assert_eq!(ids(body), ["1", "2", "3"], "nothing speaks: request order");
    for item in body["items"].as_array().unwrap() {
        assert_eq!(item["item_id"], item["id"]);
        assert!(item["score"].is_number());
    }
    // An id given twice is ranked once per occurrence, as recommend does.
    let body = json!({"query": "x", "item_ids": ["1", "2", "1", "3"]});
    assert_eq!(catalog.rerank(body), ["1", "2", "1", "3"], "duplicates kept");
}

#[test]
fn rerank_weighs_text_and_the_sessions_taste() {
    let catalog = Catalog::load();
    // Text: the film the query names comes first among the given ids.
    let reranked = catalog.rerank(json!({"query": "Toy Story", "item_ids": ["2", "3114", "1", "unknown"]}));
    assert_eq!(reranked[..2], ["1", "3114"]);
    assert_eq!(reranked.len(), 4, "unknown ids are kept");

    // Personalization: horror clicks in the session lift horror among the given ids.
    let clicked = catalog.of_genre("Horror", "Comedy", "\u{0}", 6);
    catalog.click("horror-rerank", &clicked);
    let horror: Vec<String> = catalog.of_genre("Horror", "Comedy", "\u{0}", 16)[6..].to_vec();
    let comedy: Vec<String> = catalog
        .movies
        .iter()
        .filter(|m| m.genres == ["Comedy"])
        .take(10)
        .map(|m| m.id.clone())
        .collect();
    let mixed: Vec<String> = comedy
        .iter()
        .zip(&horror)
        .flat_map(|(c, h)| [c.clone(), h.clone()])
        .collect();
    let fresh = catalog.rerank(json!({"query": "qxzvwk", "item_ids": mixed, "session_id": "nobody", "limit": 10}));
    assert_eq!(fresh, mixed[..10], "no signal: request order");
    let personal =
        catalog.rerank(json!({"query": "qxzvwk", "item_ids": mixed, "session_id": "horror-rerank", "limit": 10}));
    assert_eq!(catalog.count_genre(&personal, "Horror"), 10, "{personal:?}");
    let embedded: Vec<Value> = clicked
        .iter()
        .map(|id| json!({"timestamp": rfc3339_ms(now()), "type": "purchase", "item_id": id}))
        .collect();
    let shaped = catalog.rerank(json!({"query": "qxzvwk", "item_ids": mixed, "events": embedded, "limit": 10}));
    assert_eq!(
        catalog.count_genre(&shaped, "Horror"),
        10,
        "embedded events count too: {shaped:?}"
    );
}

#[test]
fn every_invalid_input_is_refused() {
    let catalog = Catalog::load_first(20);
    let (server, key) = (&catalog.server, &catalog.key);
    let at = "2026-11-22T10:00:00Z";
    let search_cases = [
        (json!({}), "missing query"),
        (json!({"query": ""}), "empty query"),
        (json!({"query": "   "}), "blank query"),
        (json!({"query": 42}), "numeric query"),
        (json!({"query": ["a"]}), "array query"),
        (json!({"query": "a", "limit": -1}), "negative limit"),
        (json!({"query": "a", "limit": 1001}), "limit above 1000"),
        (json!({"query": "a", "limit": 2.5}), "fractional limit"),
        (json!({"query": "a", "limit": "10"}), "string limit"),
        (json!({"query": "a", "user_id": 7}), "numeric user_id"),
        (json!({"query": "a", "session_id": ""}), "empty session_id"),
        (json!({"query": "a", "events": {}}), "events not an array"),
        (json!({"query": "a", "events": ["click"]}), "event not an object"),
        (
            json!({"query": "a", "events": [{"type": "click"}]}),
            "event without timestamp",
        ),
        (
            json!({"query": "a", "events": [{"timestamp": "soon", "type": "click"}]}),
            "event with a bad timestamp",
        ),
        (
            json!({"query": "a", "events": [{"timestamp": at}]}),
            "event without type",
        ),
        (
            json!({"query": "a", "events": [{"timestamp": at, "type": 3}]}),
            "event with numeric type",
        ),
        (
            json!({"query": "a", "events": [{"timestamp": at, "type": "click", "item_id": 5}]}),
            "numeric event item_id",
        ),
        (
            json!({"query": "a", "events": [{"timestamp": at, "type": "click", "description": 5}]}),
            "numeric description",
        ),
        (json!(["query"]), "an array body"),
    ];
    for (body, what) in search_cases {
        assert_error(
            &server.post(SEARCH, key, body),
            422,
            "validation_error",
            &format!("search: {what}"),
        );
    }
    let base = json!({"query": "toy", "item_ids": ["1", "2"]});
    let with = |field: &str, value: Value| {
        let mut body = base.clone();
        if value.is_null() {
            body.as_object_mut().unwrap().remove(field);
        } else {
            body[field] = value;
        }
        body
    };
    let too_many: Vec<String> = (0..10_001).map(|i| i.to_string()).collect();
    let rerank_cases = [
        (with("query", Value::Null), "missing query"),
        (with("query", json!("")), "empty query"),
        (with("query", json!(1)), "numeric query"),
        (with("item_ids", Value::Null), "missing item_ids"),
        (with("item_ids", json!("1")), "item_ids not an array"),
        (with("item_ids", json!(["1", ""])), "an empty id"),
        (with("item_ids", json!(["1", 2])), "a numeric id"),
        (with("item_ids", json!(too_many)), "more than 10,000 ids"),
        (with("model_id", json!(5)), "numeric model_id"),
        (with("user_id", json!(false)), "boolean user_id"),
        (with("search_context", json!("mobile")), "search_context not an object"),
        (
            with("item_retrieval_metadata", json!({"item_id": "1"})),
            "metadata not an array",
        ),
        (
            with("item_retrieval_metadata", json!([{"retrieval_score": 1.0}])),
            "metadata without item_id",
        ),
        (
            with("item_retrieval_metadata", json!([{"item_id": 1}])),
            "metadata with a numeric item_id",
        ),
        (
            with(
                "item_retrieval_metadata",
                json!([{"item_id": "1", "retrieval_score": "high"}]),
            ),
            "string retrieval_score",
        ),
        (
            with("item_retrieval_metadata", json!([{"item_id": "1", "rank": -2}])),
            "negative rank",
        ),
        (
            with("item_retrieval_metadata", json!(["1"])),
            "metadata entry not an object",
        ),
        (with("events", json!([{"type": "click"}])), "event without timestamp"),
        (with("limit", json!(-5)), "negative limit"),
        (with("limit", json!("many")), "string limit"),
    ];
    for (body, what) in rerank_cases {
        assert_error(
            &server.post(RERANK, key, body),
            422,
            "validation_error",
            &format!("rerank: {what}"),
        );
    }
    assert_error(
        &server.post(RERANK, key, with("model_id", json!("no_such_model"))),
        422,
        "unknown_model",
        "rerank: unknown model",
    );
    for path in [SEARCH, RERANK, "/search/rerank"] {
        let reply = server.raw(Method::POST, path, key, b"{\"query\": ", "application/json");
        assert_error(&reply, 400, "malformed_json", &format!("{path}: not JSON"));
        let reply = server
            .send(Method::POST, path, Auth::None, Payload::Json(base.clone()), &[])
            .pair();
        assert_error(&reply, 401, "unauthorized", &format!("{path}: no key"));
        let other = server.create_key(&["recommend", "catalog:read"], json!({"name": "no-search"}));
        assert_error(
            &server.post(path, &other, base.clone()),
            403,
            "forbidden",
            &format!("{path}: no search scope"),
        );
        let reply = server.send(Method::GET, path, Auth::Bearer(key), Payload::Empty, &[]);
        assert_eq!(reply.status.as_u16(), 405, "{path}: GET");
    }
}

/// `tables` limits a search to the items of the named tables.
#[test]
fn a_search_can_be_limited_to_tables() {
    let server = TestServer::start();
    let key = server.create_key(&["search"], json!({"name": "searcher"}));
    let items = json!([
        {"id": "k1", "_table": "kayaks", "title": "Red harbour kayak"},
        {"id": "k2", "_table": "kayaks", "title": "Blue harbour kayak"},
        {"id": "t1", "_table": "tours", "title": "Harbour kayak tour"},
    ]);
    assert_status(&server.admin_put(ITEMS, items), 200, "items");
    let search = |body: Value| {
        let reply = server.post(SEARCH, &key, body.clone());
        let mut found = ids(assert_status(&reply, 200, &body.to_string()));
        found.sort();
        found
    };
    poll_until(Duration::from_secs(10), "the items searchable", || {
        match search(json!({"query": "harbour kayak"})) {
            all if all == ["k1", "k2", "t1"] => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    assert_eq!(search(json!({"query": "harbour kayak", "tables": ["tours"]})), ["t1"]);
    assert_eq!(
        search(json!({"query": "harbour kayak", "tables": ["kayaks", "absent"]})),
        ["k1", "k2"]
    );
    for bad in [json!("tours"), json!([]), json!([3]), json!([""])] {
        let reply = server.post(SEARCH, &key, json!({"query": "kayak", "tables": bad}));
        assert_error(&reply, 422, "validation_error", &bad.to_string());
    }
}
