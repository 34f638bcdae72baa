//! Fetching an `/embed` `image_url`, only when config allows it: plain `http://` to a
//! host on `embed.image_url_allow_hosts`, under one deadline and a size limit,
//! following a redirect only to another allowed URL. Every refusal is a 422.
//!
//! `https://` is refused: serving it would need a TLS stack (rustls and a crypto
//! backend) for this one feature; clients with HTTPS images send `image_bytes`.
//! Host names are resolved by the system resolver: list IP literals, or names the
//! operator controls, since a name can resolve anywhere (DNS rebinding).

use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header::{HeaderValue, LOCATION, USER_AGENT};
use hyper::{Request, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::embed::too_large_image;
use super::ApiError;
use crate::config::EmbedConfig;

/// Redirects followed at most (each to an allowed URL).
const MAX_REDIRECTS: usize = 3;

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// One client for the process: connections to the allowed hosts are pooled.
fn client() -> &'static HttpClient {
    static CLIENT: OnceLock<HttpClient> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let mut connector = HttpConnector::new();
        connector.enforce_http(true);
        Client::builder(TokioExecutor::new()).build(connector)
    })
}

/// The bytes behind `url`, or a 422 saying why not.
pub async fn fetch_image(url: &str, config: &EmbedConfig) -> Result<Vec<u8>, ApiError> {
    let deadline = Duration::from_millis(config.image_fetch_timeout_ms);
    match tokio::time::timeout(deadline, fetch_following_redirects(url, config)).await {
        Ok(result) => result,
        Err(_elapsed) => Err(ApiError::validation(format!(
            "fetching \"image_url\" took longer than {} ms",
            config.image_fetch_timeout_ms
        ))),
    }
}

async fn fetch_following_redirects(url: &str, config: &EmbedConfig) -> Result<Vec<u8>, ApiError> {
    let mut uri = allowed_uri(url, config)?;
    for _ in 0..=MAX_REDIRECTS {
        let request = Request::get(uri.clone())
            .header(USER_AGENT, HeaderValue::from_static("rankstream-embed"))
            .body(Empty::<Bytes>::new())
            .map_err(|error| ApiError::validation(format!("\"image_url\" is not a usable URL: {error}")))?;
        let response = client()
            .request(request)
            .await
            .map_err(|error| ApiError::validation(format!("fetching \"image_url\" failed: {error}")))?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|value| value.to_str().ok())
                .ok_or_else(|| ApiError::validation(format!("\"image_url\" answered {status} without a Location")))?;
            uri = allowed_uri(&resolve(&uri, location), config)
                .map_err(|error| ApiError::validation(format!("\"image_url\" redirects elsewhere: {error}")))?;
            continue;
        }
        if !status.is_success() {
            return Err(ApiError::validation(format!(
                "fetching \"image_url\" returned HTTP {status}"
            )));
        }
        let max = config.image_max_bytes;
        let announced = response
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        if announced.is_some_and(|length| length > max as u64) {
            return Err(too_large_image(max));
        }
        return match Limited::new(response.into_body(), max).collect().await {
            Ok(body) => Ok(body.to_bytes().to_vec()),
            Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(too_large_image(max)),
            Err(error) => Err(ApiError::validation(format!("reading \"image_url\" failed: {error}"))),
        };
    }
    Err(ApiError::validation(format!(
        "\"image_url\" redirected more than {MAX_REDIRECTS} times"
    )))
}

/// A redirect target, absolute or relative to the URL that answered.
fn resolve(base: &Uri, location: &str) -> String {
    if location.contains("://") {
        return location.to_owned();
    }
    let authority = base.authority().map_or("", |a| a.as_str());
    if location.starts_with('/') {
        format!("http://{authority}{location}")
    } else {
        let path = base.path();
        let directory = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        format!("http://{authority}{directory}{location}")
    }
}

/// `url` parsed, when it is `http://` to an allowed host.
fn allowed_uri(url: &str, config: &EmbedConfig) -> Result<Uri, ApiError> {
    let uri: Uri = url
        .parse()
        .map_err(|error| ApiError::validation(format!("\"image_url\" is not a valid URL: {error}")))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(ApiError::validation(
                "\"image_url\" must be http://: this server has no TLS client; send the image as \"image_bytes\"",
            ))
        }
        _ => return Err(ApiError::validation("\"image_url\" must be an absolute http:// URL")),
    }
    let host = uri
        .host()
        .ok_or_else(|| ApiError::validation("\"image_url\" has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']');
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(ApiError::validation("\"image_url\" must not carry credentials"));
    }
    let allowed = config
        .image_url_allow_hosts
        .iter()
        .any(|allowed| allowed.trim().eq_ignore_ascii_case(host));
    if !allowed {
        return Err(ApiError::validation(format!(
            "\"image_url\" host {host:?} is not on embed.image_url_allow_hosts"
        )));
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(hosts: &[&str]) -> EmbedConfig {
        EmbedConfig {
            model_dir: String::new(),
            max_text_bytes: 100,
            image_url_fetch: true,
            image_url_allow_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            image_max_bytes: 100,
            image_fetch_timeout_ms: 100,
            embed_items_at_ingest: false,
            item_text_fields: Vec::new(),
        }
    }

    #[test]
    fn only_http_urls_to_allowed_hosts_pass() {
        let config = config(&["images.example.com", "127.0.0.1", "::1"]);
        assert!(allowed_uri("http://images.example.com/a.png", &config).is_ok());
        assert!(allowed_uri("http://IMAGES.example.com:8080/a.png", &config).is_ok());
        assert!(allowed_uri("http://127.0.0.1:9/a.png", &config).is_ok());
        assert!(allowed_uri("http://[::1]:9/a.png", &config).is_ok());
        for refused in [
            "https://images.example.com/a.png",
            "http://evil.example.com/a.png",
            "http://images.example.com.evil.net/a.png",
            "http://user@images.example.com/a.png",
            "ftp://images.example.com/a.png",
            "/a.png",
            "not a url",
        ] {
            assert!(allowed_uri(refused, &config).is_err(), "{refused}");
        }
    }

    #[test]
    fn redirects_resolve_against_the_answering_url() {
        let base: Uri = "http://h:1/dir/a.png".parse().unwrap();
        assert_eq!(resolve(&base, "/b.png"), "http://h:1/b.png");
        assert_eq!(resolve(&base, "c.png"), "http://h:1/dir/c.png");
        assert_eq!(resolve(&base, "http://x/d.png"), "http://x/d.png");
    }
}
