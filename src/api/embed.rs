//! `POST /embed`: decodes the text and the image (base64 bytes, or a URL fetched by
//! `image_fetch` when allowed), and answers [`EmbedService::embed`]'s vectors.
//!
//! [`EmbedService::embed`]: crate::service::embed::EmbedService::embed

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::{DecodePaddingMode, Engine as _};
use serde_json::{Map, Value};

use super::image_fetch::fetch_image;
use super::{ok, ApiError, ApiRequest, AppState, HttpResponse};
use crate::service::embed::EmbedRequest;

/// Standard base64 alphabet, padding optional.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

pub async fn handle(state: &AppState, request: ApiRequest) -> Result<HttpResponse, ApiError> {
    let Value::Object(body) = request.json_value()? else {
        return Err(ApiError::validation("the body must be a JSON object"));
    };
    let config = state.services.embed.config();
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

    ok(&state.services.embed.embed(EmbedRequest { text, image }).await?)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_accepts_padding_either_way_and_data_urls() {
        assert_eq!(decode_image_bytes("aGk=", 10).unwrap(), b"hi");
        assert_eq!(decode_image_bytes("aGk", 10).unwrap(), b"hi");
        assert_eq!(decode_image_bytes("data:image/png;base64,aG\nk=", 10).unwrap(), b"hi");
        assert!(decode_image_bytes("not base64!", 10).is_err());
        assert!(decode_image_bytes("aGVsbG8gd29ybGQ=", 4).is_err(), "too large");
    }
}
