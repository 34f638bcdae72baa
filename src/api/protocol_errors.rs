//! Bodies for the errors hyper answers itself. A request that cannot be parsed as
//! HTTP/1.1 (400), whose URI is too long (414) or whose head is too large (431)
//! never reaches a handler: hyper writes the status with an empty body and closes the
//! connection. [`ErrorBodies`] wraps a connection and gives those answers the
//! `{code, message}` body every other error has. It recognises them by their shape
//! (an error status, `content-length: 0`, no `content-type`), which no answer of ours
//! has: every one of ours carries a JSON body.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection whose automatic error answers get a JSON body.
pub struct ErrorBodies<T> {
    inner: T,
    /// A rewritten answer and how much of it is written.
    pending: Option<(Vec<u8>, usize)>,
}

impl<T> ErrorBodies<T> {
    pub fn new(inner: T) -> ErrorBodies<T> {
        ErrorBodies { inner, pending: None }
    }
}

/// The code and message of an automatic answer's status.
fn error_body(status: u16) -> Option<(&'static str, &'static str)> {
    Some(match status {
        400 => (
            "malformed_request",
            "the request is not valid HTTP/1.1: its request line or a header could not be parsed",
        ),
        414 => ("uri_too_long", "the request URI is longer than the server accepts"),
        431 => (
            "headers_too_large",
            "the request's headers are larger (or more numerous) than the server accepts",
        ),
        _ => return None,
    })
}

/// The answer to write instead of `written`, when `written` is an automatic error
/// answer of hyper's.
fn with_body(written: &[u8]) -> Option<Vec<u8>> {
    let head = std::str::from_utf8(written).ok()?;
    let head = head.strip_suffix("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let status: u16 = status_line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| status_line.strip_prefix("HTTP/1.0 "))?
        .get(..3)?
        .parse()
        .ok()?;
    let (code, message) = error_body(status)?;
    let headers: Vec<&str> = lines.collect();
    let is_empty = |line: &&str| line.eq_ignore_ascii_case("content-length: 0");
    if !headers.iter().any(is_empty)
        || headers
            .iter()
            .any(|line| line.to_ascii_lowercase().starts_with("content-type:"))
    {
        return None;
    }
    let body = serde_json::json!({ "code": code, "message": message }).to_string();
    let mut answer = format!(
        "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for line in headers
        .iter()
        .filter(|line| !is_empty(line) && !line.to_ascii_lowercase().starts_with("connection:"))
    {
        answer.push_str(line);
        answer.push_str("\r\n");
    }
    answer.push_str("\r\n");
    answer.push_str(&body);
    Some(answer.into_bytes())
}

impl<T: AsyncWrite + Unpin> ErrorBodies<T> {
    /// Writes what is left of a rewritten answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((answer, written)) = &mut self.pending {
            if *written == answer.len() {
                self.pending = None;
                break;
            }
            let wrote = ready!(Pin::new(&mut self.inner).poll_write(cx, &answer[*written..]))?;
            if wrote == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += wrote;
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ErrorBodies<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ErrorBodies<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        if let Some(answer) = with_body(buf) {
            // Taken whole: the rest is written by the next calls (hyper flushes next).
            self.pending = Some((answer, 0));
            let _ = self.poll_pending(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automatic_answers_get_a_body_and_ours_are_left_alone() {
        let hyper = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Wed, 25 Nov 2026 10:00:00 GMT\r\n\r\n";
        let answer = String::from_utf8(with_body(hyper).expect("rewritten")).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{head}"
        );
        assert!(
            head.contains("content-type: application/json") && head.contains("date: Wed"),
            "{head}"
        );
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["code"], "headers_too_large");

        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(with_body(ours), None, "an answer with a content type is ours");
        let success = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(with_body(success), None);
        let partial = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n";
        assert_eq!(with_body(partial), None, "not a whole head");
    }
}
