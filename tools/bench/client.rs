//! The load generator's HTTP side: a [`Target`] (a server's base URL and key) opens
//! keep-alive HTTP/1.1 connections and sends authenticated requests on them.

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

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
    pub async fn connect(&self) -> Result<SendRequest<Full<Bytes>>> {
        let stream = TcpStream::connect(&self.authority)
            .await
            .with_context(|| format!("connecting to {}", self.authority))?;
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        Ok(sender)
    }

    /// Sends one authenticated request (a body only with a content type) and returns
    /// its status and whole body.
    pub async fn send(
        &self,
        sender: &mut SendRequest<Full<Bytes>>,
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

    /// `GET path` without a body.
    pub async fn get(&self, sender: &mut SendRequest<Full<Bytes>>, path: &str) -> Result<(StatusCode, Bytes)> {
        self.send(sender, Method::GET, path, None, Bytes::new()).await
    }
}
