//! The MovieLens catalog the chat tests load (`../shared/data/movielens_latest_small/movies.csv`):
//! title → `name`, genres → `groups`, plus a synthetic `price`, `currency` and
//! `availability` derived from the movie id, so that every expectation is computed
//! from the same rules.

use std::time::Duration;

use serde_json::{json, Value};

use super::{poll_until, TestServer};

pub const MOVIES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/data/movielens_latest_small/movies.csv"
);

/// One movie as the test loads it.
#[derive(Debug, Clone)]
pub struct Movie {
    pub title: String,
    pub genres: Vec<String>,
    pub price: f64,
    pub currency: Option<&'static str>,
    /// `available`, `unavailable` or `unknown`: the status chat must report.
    pub status: &'static str,
}

/// 1.00 to 29.99, spread over the ids.
pub fn movie_price(id: u64) -> f64 {
    1.0 + ((id * 7919) % 2900) as f64 / 100.0
}

/// The catalog row of a movie and what the test knows about it.
pub fn movie_row(id: u64, title: &str, genres: &str) -> (Value, Movie) {
    let genres: Vec<String> = genres.split('|').map(str::to_owned).collect();
    let price = movie_price(id);
    let currency = (!id.is_multiple_of(3)).then_some("USD");
    let mut row = json!({"id": id.to_string(), "_table": "movies", "name": title, "groups": genres, "price": price});
    let status = match id % 10 {
        0 => {
            row["availability"] = json!("sold_out");
            "unavailable"
        }
        1 => "unknown",
        _ => {
            row["availability"] = json!("available");
            "available"
        }
    };
    if let Some(currency) = currency {
        row["currency"] = json!(currency);
    }
    let movie = Movie {
        title: title.to_owned(),
        genres,
        price,
        currency,
        status,
    };
    (row, movie)
}

/// Reads movies.csv (failing clearly when it is missing): row, id and movie.
pub fn movies() -> Vec<(Value, u64, Movie)> {
    let file = std::fs::File::open(MOVIES).unwrap_or_else(|error| panic!("{MOVIES} is required: {error}"));
    let mut reader = csv::Reader::from_reader(file);
    reader
        .records()
        .map(|record| {
            let record = record.expect("a movies.csv record");
            let id: u64 = record[0].parse().expect("numeric movieId");
            let (row, movie) = movie_row(id, &record[1], &record[2]);
            (row, id, movie)
        })
        .collect()
}

/// Search is fed near-real-time: waits until searching `name` finds item `id`
/// (load the catalog first, then wait for its last item).
pub fn wait_until_searchable(server: &TestServer, name: &str, id: &str) {
    poll_until(Duration::from_secs(30), "the catalog to be searchable", || {
        let reply = server.admin_post("/v1/search", json!({"query": name, "limit": 10}));
        let found = reply.1["items"]
            .as_array()
            .is_some_and(|items| items.iter().any(|item| item["id"] == id));
        if found {
            Ok(())
        } else {
            Err(format!("{} {}", reply.0, reply.1))
        }
    });
}
