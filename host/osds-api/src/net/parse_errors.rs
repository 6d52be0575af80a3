//! hyper's own answers to requests it cannot read, given the service's error body.
//!
//! A request line or header block that is not HTTP, a URI over hyper's limit or headers over its buffer never
//! reach the router: hyper answers 400, 414 or 431 itself, with an empty body, and closes the connection. Every
//! other error carries `{"error", "code"}`, so [`ErrorBodies`] watches what a connection writes and puts that body
//! in such an answer: a response head of one of those statuses with no `content-type` and no body. The router's
//! own answers always have a content type, and after an upgrade (`101`) nothing is looked at.

use crate::error::ErrorCode;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection's stream whose parse-error answers get the error body.
pub struct ErrorBodies<S> {
    inner: S,
    /// An answer being written in place of hyper's, and how much of it is written.
    replacing: Option<(Vec<u8>, usize)>,
    /// Set once the connection was upgraded: it carries WebSocket frames from then on.
    upgraded: bool,
}

impl<S> ErrorBodies<S> {
    pub fn new(inner: S) -> ErrorBodies<S> {
        ErrorBodies {
            inner,
            replacing: None,
            upgraded: false,
        }
    }
}

/// The answer to write instead of `head`, when it is hyper's empty answer to a request it could not read.
fn replacement(head: &[u8]) -> Option<Vec<u8>> {
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    if end != head.len() {
        return None; // a body follows: an answer of the router's
    }
    let text = std::str::from_utf8(head).ok()?;
    let (status, code, sentence) = match text.get(..13)? {
        "HTTP/1.1 400 " | "HTTP/1.0 400 " => (
            "400 Bad Request",
            ErrorCode::MalformedRequest,
            "the request is not valid HTTP/1.1: its request line or a header could not be read",
        ),
        "HTTP/1.1 414 " | "HTTP/1.0 414 " => (
            "414 URI Too Long",
            ErrorCode::UriTooLong,
            "the request's URI is too long",
        ),
        "HTTP/1.1 431 " | "HTTP/1.0 431 " => (
            "431 Request Header Fields Too Large",
            ErrorCode::HeadersTooLarge,
            "the request's headers are too large",
        ),
        _ => return None,
    };
    let lower = text.to_ascii_lowercase();
    if lower.contains("\r\ncontent-type:") || !lower.contains("\r\ncontent-length: 0\r\n") {
        return None;
    }
    let body = serde_json::json!({"error": sentence, "code": code.as_str()}).to_string();
    Some(
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nx-content-type-options: nosniff\r\n\
             connection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<S: AsyncWrite + Unpin> ErrorBodies<S> {
    /// Writes what is left of a replacement answer.
    fn poll_replacing(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((answer, written)) = &mut self.replacing {
            if *written == answer.len() {
                self.replacing = None;
                break;
            }
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &answer[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Whether `buf` is the start of an answer to look at; takes the replacement when it is one.
    fn intercept(&mut self, buf: &[u8]) -> bool {
        if self.upgraded {
            return false;
        }
        if buf.starts_with(b"HTTP/1.1 101 ") {
            self.upgraded = true;
            return false;
        }
        match replacement(buf) {
            Some(answer) => {
                self.replacing = Some((answer, 0));
                true
            }
            None => false,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ErrorBodies<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ErrorBodies<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_replacing(cx))?;
        if this.intercept(buf) {
            // hyper's answer counts as written; ours goes out in its place (now, or on the next flush).
            let _ = this.poll_replacing(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_replacing(cx))?;
        let nonempty: Vec<&io::IoSlice<'_>> = bufs.iter().filter(|b| !b.is_empty()).collect();
        if let [only] = nonempty.as_slice()
            && this.intercept(only)
        {
            let _ = this.poll_replacing(cx)?;
            return Poll::Ready(Ok(only.len()));
        }
        if let Some(first) = nonempty.first()
            && first.starts_with(b"HTTP/1.1 101 ")
        {
            this.upgraded = true;
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_replacing(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_replacing(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_empty_answers_are_replaced() {
        let hyper =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let answer = String::from_utf8(replacement(hyper).unwrap()).unwrap();
        assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
        let body: serde_json::Value =
            serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(body["code"], "headers_too_large");
        let routers = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(replacement(routers), None);
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(replacement(with_body), None);
        assert_eq!(
            replacement(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"),
            None
        );
    }
}
