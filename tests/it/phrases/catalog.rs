//! A catalog as the suite knows it: every item with the facts the checks read
//! (price, groups, tags, year, languages, audience, status), the catalog's price
//! and year quantiles, and loading its rows into a server.

use std::collections::HashMap;

use serde_json::Value;

use crate::common::movielens::{movies, wait_until_searchable};
use crate::common::{assert_status, TestServer, ITEMS};

/// Rows per bulk upsert.
const CHUNK: usize = 2_000;

/// One catalog item, as the checks see it.
#[derive(Debug, Clone)]
pub struct Item {
    pub id: String,
    /// The row's `name`, which chat shows as the title.
    pub title: String,
    pub groups: Vec<String>,
    pub tags: Vec<String>,
    pub price: f64,
    pub currency: Option<&'static str>,
    /// `available`, `unavailable` or `unknown`, as chat reports it.
    pub status: &'static str,
    /// From a `(YYYY)` at the end of the title (MovieLens); tours have none.
    pub year: Option<i32>,
    /// Live guide language codes (tours); empty for movies.
    pub languages: Vec<&'static str>,
    /// Suits a child: in the Children group (MovieLens), an age range open to age 12 or less (tours).
    pub for_kids: bool,
    /// Not for children only.
    pub for_adults: bool,
}

impl Item {
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|own| own == group)
    }

    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.iter().any(|own| own.eq_ignore_ascii_case(tag))
    }

    /// The price as chat prints it: "12.99 USD", or "12.99" without a currency.
    pub fn price_text(&self) -> String {
        match self.currency {
            Some(currency) => format!("{:.2} {currency}", self.price),
            None => format!("{:.2}", self.price),
        }
    }
}

/// The items of one catalog, by id, with the quantiles the price and year bands use.
pub struct Catalog {
    pub name: &'static str,
    pub items: Vec<Item>,
    by_id: HashMap<String, usize>,
    /// Every item's price, sorted.
    prices: Vec<f64>,
    /// The years of the items that have one, sorted.
    years: Vec<i32>,
}

impl Catalog {
    pub fn new(name: &'static str, items: Vec<Item>) -> Catalog {
        let by_id = items
            .iter()
            .enumerate()
            .map(|(index, item)| (item.id.clone(), index))
            .collect();
        let mut prices: Vec<f64> = items.iter().map(|item| item.price).collect();
        prices.sort_by(f64::total_cmp);
        let mut years: Vec<i32> = items.iter().filter_map(|item| item.year).collect();
        years.sort_unstable();
        Catalog {
            name,
            items,
            by_id,
            prices,
            years,
        }
    }

    pub fn get(&self, id: &str) -> Option<&Item> {
        self.by_id.get(id).map(|index| &self.items[*index])
    }

    pub fn by_title(&self, title: &str) -> Option<&Item> {
        self.items.iter().find(|item| item.title == title)
    }

    /// q(p) of the chat rules: P[round(p * (len - 1))] over the sorted prices.
    pub fn price_quantile(&self, p: f64) -> f64 {
        self.prices[quantile_index(p, self.prices.len())]
    }

    /// Y(p): the same over the sorted years.
    pub fn year_quantile(&self, p: f64) -> i32 {
        self.years[quantile_index(p, self.years.len())]
    }

    pub fn latest_year(&self) -> i32 {
        *self.years.last().expect("a catalog with years")
    }
}

fn quantile_index(p: f64, len: usize) -> usize {
    assert!(len > 0, "a quantile of nothing");
    (p * (len - 1) as f64).round() as usize
}

/// The year of a MovieLens title: "Toy Story (1995)" → 1995.
pub fn title_year(title: &str) -> Option<i32> {
    let inside = title.trim().strip_suffix(')')?;
    let (_, year) = inside.rsplit_once('(')?;
    (year.len() == 4).then(|| year.parse().ok()).flatten()
}

/// The MovieLens rows (the ones `tests/chat.rs` loads) and the catalog the checks read.
pub fn movielens() -> (Vec<Value>, Catalog) {
    let mut rows = Vec::new();
    let mut items = Vec::new();
    for (row, id, movie) in movies() {
        let for_kids = movie.genres.iter().any(|genre| genre == "Children");
        items.push(Item {
            id: id.to_string(),
            year: title_year(&movie.title),
            title: movie.title,
            groups: movie.genres,
            tags: Vec::new(),
            price: movie.price,
            currency: movie.currency,
            status: movie.status,
            languages: Vec::new(),
            for_kids,
            for_adults: !for_kids,
        });
        rows.push(row);
    }
    (rows, Catalog::new("MovieLens", items))
}

/// Upserts the rows in bulk and waits until search finds the last one.
pub fn load(server: &TestServer, rows: &[Value], catalog: &Catalog) {
    for chunk in rows.chunks(CHUNK) {
        let reply = server.admin_put(ITEMS, Value::Array(chunk.to_vec()));
        let body = assert_status(&reply, 200, &format!("bulk upsert of {}", catalog.name));
        assert_eq!(body["upserted"], chunk.len(), "every row upserted: {body}");
    }
    let last = catalog.items.last().expect("a catalog with items");
    wait_until_searchable(server, &last.title, &last.id);
}
