//! Embeddings: a text's vector (and an image's) from the node's embedder, and the
//! ingest-time vectors of catalog items.

use serde::Serialize;
use serde_json::{Map, Value};

use super::ServiceError;
use crate::config::EmbedConfig;
use crate::embed::Lane;
use crate::embed::SharedEmbedder;

/// What to embed: a text, and an image's bytes (already fetched or decoded).
#[derive(Debug, Clone)]
pub struct EmbedRequest {
    pub text: String,
    pub image: Option<Vec<u8>>,
}

/// The vectors and the model that made them. Serialized as the `/embed` answer
/// (DESIGN.md §7), directly, so that floats keep their short f32 form.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Embedding {
    pub embedding: Vec<f32>,
    pub model: String,
    pub dimensions: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_embedding: Option<Vec<f32>>,
}

/// Text and image vectors, for `/embed` and for items at ingest.
pub struct EmbedService {
    embedder: SharedEmbedder,
    /// `/embed` limits and ingest-time embedding settings.
    config: EmbedConfig,
}

impl EmbedService {
    pub fn new(embedder: SharedEmbedder, config: EmbedConfig) -> EmbedService {
        EmbedService { embedder, config }
    }

    /// `/embed` limits and ingest-time embedding settings.
    pub fn config(&self) -> &EmbedConfig {
        &self.config
    }
}

impl EmbedService {
    /// The request's text vector, and its image's when it has one, in the request lane.
    pub async fn embed(&self, request: EmbedRequest) -> Result<Embedding, ServiceError> {
        let EmbedRequest { text, image } = request;
        let (embedding, image_embedding) = self
            .embedder
            .run(Lane::Request, move |embedder| {
                let embedding = embedder.embed_texts(&[&text])?.pop();
                let image_embedding = image.map(|bytes| embedder.embed_image(&bytes)).transpose()?;
                Ok((embedding, image_embedding))
            })
            .await?;
        let embedding = embedding.ok_or_else(|| ServiceError::Internal("the embedder returned no vector".into()))?;
        Ok(Embedding {
            embedding,
            model: self.embedder.name().to_owned(),
            dimensions: self.embedder.dimensions(),
            image_embedding,
        })
    }
}

impl EmbedService {
    /// With `embed.embed_items_at_ingest` on: gives every item object that has no
    /// `embeddings` (nor `embedding`) field one, computed from its text fields in one
    /// batch off the async workers. Rows that are not objects or have no text are left
    /// as they are (the catalog reports what is wrong with them).
    pub(super) async fn embed_items(&self, rows: &mut [Value]) -> Result<(), ServiceError> {
        let config = &self.config;
        if !config.embed_items_at_ingest {
            return Ok(());
        }
        let mut targets = Vec::new();
        let mut texts = Vec::new();
        for (index, row) in rows.iter().enumerate() {
            let Value::Object(item) = row else { continue };
            if item.contains_key("embeddings") || item.contains_key("embedding") {
                continue;
            }
            if let Some(text) = item_text(item, &config.item_text_fields, config.max_text_bytes) {
                targets.push(index);
                texts.push(text);
            }
        }
        if texts.is_empty() {
            return Ok(());
        }
        let vectors = self.embedder.embed_owned(Lane::Ingest, texts).await?;
        for (index, vector) in targets.into_iter().zip(vectors) {
            if let Value::Object(item) = &mut rows[index] {
                item.insert("embeddings".to_owned(), vector_value(&vector));
            }
        }
        Ok(())
    }
}

/// The text of an item: its configured fields in order (strings, and the strings of
/// arrays), joined; cut to `max_bytes`. `None` when it has none.
fn item_text(item: &Map<String, Value>, fields: &[String], max_bytes: usize) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for field in fields {
        match item.get(field) {
            Some(Value::String(text)) if !text.trim().is_empty() => parts.push(text.trim().to_owned()),
            Some(Value::Array(values)) => {
                let strings: Vec<&str> = values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect();
                if !strings.is_empty() {
                    parts.push(strings.join(", "));
                }
            }
            _ => {}
        }
    }
    if parts.is_empty() {
        return None;
    }
    let mut text = parts.join(". ");
    if text.len() > max_bytes {
        let mut cut = max_bytes;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    Some(text)
}

/// A vector as JSON numbers in their shortest f32 form (`0.05263158`, not
/// `0.052631579339504242`): the stored item stays small and loses nothing.
fn vector_value(vector: &[f32]) -> Value {
    Value::Array(
        vector
            .iter()
            .map(|x| {
                let short: f64 = x.to_string().parse().unwrap_or(*x as f64);
                serde_json::Number::from_f64(short).map_or(Value::Null, Value::Number)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn item_text_joins_strings_and_arrays_in_field_order() {
        let item = json!({"title": "Toy Story (1995)", "groups": ["Animation", " Comedy "], "price": 3, "tags": []});
        let fields: Vec<String> = ["name", "title", "groups", "tags"].map(String::from).to_vec();
        let text = item_text(item.as_object().unwrap(), &fields, 1000);
        assert_eq!(text.as_deref(), Some("Toy Story (1995). Animation, Comedy"));
        assert_eq!(item_text(json!({"price": 1}).as_object().unwrap(), &fields, 1000), None);
        let cut = item_text(json!({"name": "ééé"}).as_object().unwrap(), &fields, 3).unwrap();
        assert_eq!(cut, "é", "cut on a character boundary");
    }

    #[test]
    fn vectors_keep_their_short_form() {
        let value = vector_value(&[0.05263158, -1.0]);
        assert_eq!(value.to_string(), "[0.05263158,-1.0]");
    }
}
