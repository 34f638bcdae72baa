//! `POST /embed`: a text's vector (and an image's) from the configured embedder; and
//! the ingest-time hook that gives catalog items without `embeddings` one.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::{DecodePaddingMode, Engine as _};
use serde::Serialize;
use serde_json::{Map, Value};

use super::image_fetch::fetch_image;
use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::embed::Lane;

/// Standard base64 alphabet, padding optional.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The 200 body (DESIGN.md §7); serialized directly so floats keep their short f32 form.
#[derive(Serialize)]
struct EmbedResponse<'a> {
    embedding: Vec<f32>,
    model: &'a str,
    dimensions: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    image_embedding: Option<Vec<f32>>,
}

pub async fn handle(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let Value::Object(body) = request.json_value()? else {
        return Err(ApiError::validation("the body must be a JSON object"));
    };
    let config = &state.embed_config;
    let text = match body.get("text") {
        None | Some(Value::Null) => return Err(ApiError::validation("\"text\" is required")),
        Some(Value::String(text)) => text.clone(),
        Some(_) => return Err(ApiError::validation("\"text\" must be a string")),
    };
    if text.trim().is_empty() {
        return Err(ApiError::validation("\"text\" must not be empty"));
    }
    if text.len() > config.max_text_bytes {
        return Err(ApiError::validation(format!(
            "\"text\" is {} bytes, at most {} are accepted",
            text.len(),
            config.max_text_bytes
        )));
    }
    let image = match (
        optional_string(&body, "image_bytes")?,
        optional_string(&body, "image_url")?,
    ) {
        (Some(_), Some(_)) => {
            return Err(ApiError::validation(
                "give at most one of \"image_bytes\" and \"image_url\"",
            ))
        }
        (Some(encoded), None) => Some(decode_image_bytes(encoded, config.image_max_bytes)?),
        (None, Some(url)) => {
            if !config.image_url_fetch {
                return Err(ApiError::validation(
                    "\"image_url\" is not fetched by this server (embed.image_url_fetch is off); send the image as \"image_bytes\"",
                ));
            }
            Some(fetch_image(url, config).await?)
        }
        (None, None) => None,
    };

    let (embedding, image_embedding) = state
        .embedder
        .run(Lane::Request, move |embedder| {
            let embedding = embedder.embed_texts(&[&text])?.pop();
            let image_embedding = image.map(|bytes| embedder.embed_image(&bytes)).transpose()?;
            Ok((embedding, image_embedding))
        })
        .await?;
    let embedding = embedding.ok_or_else(|| ApiError::Internal("the embedder returned no vector".into()))?;
    ok(&EmbedResponse {
        embedding,
        model: state.embedder.name(),
        dimensions: state.embedder.dimensions(),
        image_embedding,
    })
}

/// An optional string field: absent or null → `None`; another type → 422.
fn optional_string<'a>(body: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, ApiError> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value)),
        Some(_) => Err(ApiError::validation(format!("\"{name}\" must be a string"))),
    }
}

/// `image_bytes`: base64 (standard alphabet, padding optional, line breaks and a
/// `data:...;base64,` prefix tolerated), at most `max_bytes` once decoded.
fn decode_image_bytes(encoded: &str, max_bytes: usize) -> Result<Vec<u8>, ApiError> {
    let payload = match encoded.split_once(";base64,") {
        Some((prefix, payload)) if prefix.starts_with("data:") => payload,
        _ => encoded,
    };
    let compact: Vec<u8> = payload.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if compact.is_empty() {
        return Err(ApiError::validation("\"image_bytes\" is empty"));
    }
    // Refuse before decoding what would be too large anyway.
    if compact.len() / 4 * 3 > max_bytes + 3 {
        return Err(too_large_image(max_bytes));
    }
    let bytes = BASE64
        .decode(&compact)
        .map_err(|error| ApiError::validation(format!("\"image_bytes\" is not valid base64: {error}")))?;
    if bytes.len() > max_bytes {
        return Err(too_large_image(max_bytes));
    }
    Ok(bytes)
}

pub(super) fn too_large_image(max_bytes: usize) -> ApiError {
    ApiError::validation(format!("the image exceeds {max_bytes} bytes (embed.image_max_bytes)"))
}

/// With `embed.embed_items_at_ingest` on: gives every item object that has no
/// `embeddings` (nor `embedding`) field one, computed from its text fields in one
/// batch off the async workers. Rows that are not objects or have no text are left
/// as they are (the catalog reports what is wrong with them).
pub(super) async fn embed_items(state: &AppState, rows: &mut [Value]) -> Result<(), ApiError> {
    let config = &state.embed_config;
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
    let vectors = state
        .embedder
        .run(Lane::Ingest, move |embedder| {
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            embedder.embed_texts(&texts)
        })
        .await?;
    for (index, vector) in targets.into_iter().zip(vectors) {
        if let Value::Object(item) = &mut rows[index] {
            item.insert("embeddings".to_owned(), vector_value(&vector));
        }
    }
    Ok(())
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
    fn base64_accepts_padding_either_way_and_data_urls() {
        assert_eq!(decode_image_bytes("aGk=", 10).unwrap(), b"hi");
        assert_eq!(decode_image_bytes("aGk", 10).unwrap(), b"hi");
        assert_eq!(decode_image_bytes("data:image/png;base64,aG\nk=", 10).unwrap(), b"hi");
        assert!(decode_image_bytes("not base64!", 10).is_err());
        assert!(decode_image_bytes("aGVsbG8gd29ybGQ=", 4).is_err(), "too large");
    }

    #[test]
    fn vectors_keep_their_short_form() {
        let value = vector_value(&[0.05263158, -1.0]);
        assert_eq!(value.to_string(), "[0.05263158,-1.0]");
    }
}
