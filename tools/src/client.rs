//! The load generator's HTTP side: a [`Target`] (a server's base URL and key) opens
//! keep-alive HTTP/1.1 connections and sends authenticated requests on them; an
//! [`Endpoint`] is where a load loop or a setup step sends its bodies.

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// One open keep-alive HTTP/1.1 connection, one request in flight at a time.
pub type Connection = SendRequest<Full<Bytes>>;

/// Where the requests go.
pub struct Target {
    /// `host:port`, for connecting and the Host header.
    pub authority: String,
    /// Path prefix of the base URL, without a trailing slash.
    pub base_path: String,
    /// The bearer key of every request.
    pub key: String,
}

impl Target {
    /// `url` is the server's base URL (`http://host:port[/prefix]`), `key` its bearer key.
    pub fn parse(url: &str, key: String) -> Result<Target> {
        let uri: Uri = url.parse().with_context(|| format!("bad url {url:?}"))?;
        ensure!(
            uri.scheme_str() == Some("http"),
            "only http:// urls are supported: {url}"
        );
        let authority = uri.authority().context("url has no host")?;
        let port = authority.port_u16().unwrap_or(80);
        let base_path = uri.path().trim_end_matches('/').to_string();
        Ok(Target {
            authority: format!("{}:{port}", authority.host()),
            base_path,
            key,
        })
    }

    /// Opens one HTTP/1.1 keep-alive connection.
    pub async fn connect(&self) -> Result<Connection> {
        let stream = TcpStream::connect(&self.authority)
            .await
            .with_context(|| format!("connecting to {}", self.authority))?;
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        Ok(sender)
    }

    /// Opens `count` keep-alive connections, one after the other.
    pub async fn connect_many(&self, count: usize) -> Result<Vec<Connection>> {
        let mut connections = Vec::with_capacity(count);
        for _ in 0..count {
            connections.push(self.connect().await?);
        }
        Ok(connections)
    }

    /// Sends one authenticated request (a body only with a content type) and returns
    /// its status and whole body.
    pub async fn send(
        &self,
        sender: &mut Connection,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Result<(StatusCode, Bytes)> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base_path))
            .header(HOST, &self.authority)
            .header(AUTHORIZATION, format!("Bearer {}", self.key));
        if let Some(content_type) = content_type {
            request = request.header(CONTENT_TYPE, content_type);
        }
        sender.ready().await?;
        let response = sender.send_request(request.body(Full::new(body))?).await?;
        let status = response.status();
        Ok((status, response.into_body().collect().await?.to_bytes()))
    }

    /// Sends `body` to `endpoint`.
    pub async fn call(&self, sender: &mut Connection, endpoint: &Endpoint, body: Bytes) -> Result<(StatusCode, Bytes)> {
        let method = endpoint.method.clone();
        self.send(sender, method, endpoint.path, Some(endpoint.content_type), body)
            .await
    }

    /// `GET path` without a body.
    pub async fn get(&self, sender: &mut Connection, path: &str) -> Result<(StatusCode, Bytes)> {
        self.send(sender, Method::GET, path, None, Bytes::new()).await
    }
}

/// A method, a path and the content type of the bodies sent there.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub method: Method,
    /// Below the target's base path, e.g. `/v1/recommend`.
    pub path: &'static str,
    /// The `Content-Type` of every body sent there.
    pub content_type: &'static str,
}

impl Endpoint {
    /// `POST path` with JSON bodies.
    pub const fn post_json(path: &'static str) -> Endpoint {
        Endpoint {
            method: Method::POST,
            path,
            content_type: "application/json",
        }
    }
}

/// `PUT /v1/catalog/items` with NDJSON bodies, one item a line: the bulk upsert.
pub const CATALOG_ITEMS: Endpoint = Endpoint {
    method: Method::PUT,
    path: "/v1/catalog/items",
    content_type: "application/x-ndjson",
};
/// `POST /v1/events` with `{"events": [...]}` or single-event bodies.
pub const EVENTS: Endpoint = Endpoint::post_json("/v1/events");
/// `POST /v1/search`.
pub const SEARCH: Endpoint = Endpoint::post_json("/v1/search");

/// The start of a response body, for an error message.
pub fn snippet(body: &[u8]) -> String {
    String::from_utf8_lossy(body).chars().take(300).collect()
}
