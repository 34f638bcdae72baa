//! The catalog as chat filters it: every item row, and the catalog's own [`Scale`]
//! (price quantiles, newest and old years) for the words that name no amount.
//! Built from a scan of the stored items and replaced when the catalog changes.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::constraints::Scale;
use super::filter::{price_of, year_of};

/// One item of the catalog.
#[derive(Debug, Clone)]
pub struct CatalogRow {
    pub id: String,
    pub table: String,
    /// Shared with the answers that show it.
    pub row: Arc<Map<String, Value>>,
}

/// Every item (soft-deleted ones left out) and the catalog's scale.
#[derive(Debug, Default)]
pub struct ChatCatalog {
    /// The catalog's version when it was read (see `ItemReader::version`).
    pub version: u64,
    pub rows: Vec<CatalogRow>,
    pub scale: Scale,
    /// Row position by item id (the first table's, for an id in several).
    index: HashMap<String, usize>,
}

/// The value at quantile `p` of sorted `values`: `values[round(p × (n − 1))]`.
fn quantile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let last = sorted.len().checked_sub(1)?;
    sorted.get((p * last as f64).round() as usize).copied()
}

impl ChatCatalog {
    /// The catalog of these stored rows, read at `version`.
    pub fn new(version: u64, stored: Vec<Map<String, Value>>) -> ChatCatalog {
        let mut rows = Vec::with_capacity(stored.len());
        let mut prices = Vec::new();
        let mut years = Vec::new();
        for row in stored {
            if row.get("is_deleted") == Some(&Value::Bool(true)) {
                continue;
            }
            let text = |field: &str| row.get(field).and_then(Value::as_str).map(str::to_owned);
            let Some(id) = text("id") else { continue };
            let table = text("_table").unwrap_or_default();
            prices.extend(price_of(&row));
            years.extend(year_of(&row));
            rows.push(CatalogRow {
                id,
                table,
                row: Arc::new(row),
            });
        }
        prices.sort_by(f64::total_cmp);
        years.sort_unstable();
        let scale = Scale {
            prices: [0.10, 0.25, 0.50, 0.75]
                .map(|p| quantile(&prices, p))
                .into_iter()
                .collect::<Option<Vec<f64>>>()
                .and_then(|found| found.try_into().ok()),
            years: years.last().copied().zip(quantile(&years, 0.2)),
        };
        let mut index = HashMap::with_capacity(rows.len());
        for (position, item) in rows.iter().enumerate() {
            index.entry(item.id.clone()).or_insert(position);
        }
        ChatCatalog {
            version,
            rows,
            scale,
            index,
        }
    }

    /// The item with this id.
    pub fn get(&self, id: &str) -> Option<&CatalogRow> {
        self.rows.get(*self.index.get(id)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_scale_comes_from_the_catalogs_own_prices_and_years() {
        let rows = (1..=11)
            .map(|n| {
                let row =
                    json!({"id": n.to_string(), "_table": "t", "price": n as f64, "name": format!("T ({})", 1990 + n)});
                row.as_object().unwrap().clone()
            })
            .chain([json!({"id": "gone", "price": 1000, "is_deleted": true})
                .as_object()
                .unwrap()
                .clone()])
            .collect();
        let catalog = ChatCatalog::new(7, rows);
        assert_eq!(catalog.rows.len(), 11);
        assert_eq!(catalog.scale.prices, Some([2.0, 4.0, 6.0, 9.0]));
        assert_eq!(catalog.scale.years, Some((2001, 1993)));
        assert_eq!(ChatCatalog::new(0, Vec::new()).scale, Scale::default());
    }
}
