//! The upstream socket: TCP, TLS for `wss://`, and the relay's text frames read as binary ones.
//!
//! tungstenite refuses a text message that is not UTF-8 and drops its bytes, but the archive keeps every payload
//! as it came (a frame that does not decode is stored as unparsed). So between the decrypted stream and
//! tungstenite sits [`TextAsBinary`]: it passes the HTTP upgrade answer through, then follows the server's frame
//! headers and marks every text frame (opcode 1) binary (opcode 2). Continuation and control frames, lengths and
//! payloads are untouched; what reaches the archive is the payload's bytes either way.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_tungstenite::MaybeTlsStream;
use tokio_tungstenite::tungstenite::client::{IntoClientRequest, uri_mode};
use tokio_tungstenite::tungstenite::error::{Error, UrlError};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::stream::Mode;

pub(super) type Socket =
    tokio_tungstenite::WebSocketStream<TextAsBinary<MaybeTlsStream<TcpStream>>>;

/// Connects to `url` (`ws://` or `wss://`) and upgrades, with `limits`.
pub(super) async fn connect(url: &str, limits: WebSocketConfig) -> Result<Socket, Error> {
    let request = url.into_client_request()?;
    let mode = uri_mode(request.uri())?;
    let host = request
        .uri()
        .host()
        .ok_or(Error::Url(UrlError::NoHostName))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = request.uri().port_u16().unwrap_or(match mode {
        Mode::Plain => 80,
        Mode::Tls => 443,
    });
    let tcp = TcpStream::connect((host.as_str(), port)).await?;
    let stream = match mode {
        Mode::Plain => MaybeTlsStream::Plain(tcp),
        Mode::Tls => {
            let name = rustls::pki_types::ServerName::try_from(host).map_err(|_| {
                Error::Tls(tokio_tungstenite::tungstenite::error::TlsError::InvalidDnsName)
            })?;
            let tls = tokio_rustls::TlsConnector::from(tls_config())
                .connect(name, tcp)
                .await?;
            MaybeTlsStream::Rustls(tls)
        }
    };
    let (socket, _) = tokio_tungstenite::client_async_with_config(
        request,
        TextAsBinary::new(stream),
        Some(limits),
    )
    .await?;
    Ok(socket)
}

/// The web's root certificates (Mozilla's, as `webpki-roots` ships them), as tokio-tungstenite uses them.
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            Arc::new(
                rustls::ClientConfig::builder()
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            )
        })
        .clone()
}

/// A client's stream whose incoming text frames read as binary frames (see the module comment).
pub(super) struct TextAsBinary<S> {
    inner: S,
    state: Reading,
}

/// Where the incoming bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// In the HTTP answer to the upgrade; `tail` holds its last four bytes.
    Answer { tail: u32 },
    /// In a frame's header: `have` of its `need` bytes (2 until the length byte says more).
    Header {
        bytes: [u8; 14],
        have: usize,
        need: usize,
    },
    /// In a frame's payload, `left` bytes to go.
    Payload { left: u64 },
}

const FIRST_HEADER: Reading = Reading::Header {
    bytes: [0; 14],
    have: 0,
    need: 2,
};
const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;

impl<S> TextAsBinary<S> {
    pub(super) fn new(inner: S) -> TextAsBinary<S> {
        TextAsBinary {
            inner,
            state: Reading::Answer { tail: 0 },
        }
    }

    /// Follows `read` (the next bytes from the server), marking text frames binary in place.
    fn follow(&mut self, read: &mut [u8]) {
        let mut at = 0;
        while at < read.len() {
            match &mut self.state {
                Reading::Answer { tail } => {
                    *tail = (*tail << 8) | u32::from(read[at]);
                    at += 1;
                    if *tail == u32::from_be_bytes(*b"\r\n\r\n") {
                        self.state = FIRST_HEADER;
                    }
                }
                Reading::Header { bytes, have, need } => {
                    if *have == 0 && read[at] & 0x0f == TEXT {
                        read[at] = (read[at] & 0xf0) | BINARY;
                    }
                    bytes[*have] = read[at];
                    *have += 1;
                    at += 1;
                    if *have == 2 {
                        let masked = bytes[1] & 0x80 != 0;
                        *need =
                            2 + match bytes[1] & 0x7f {
                                126 => 2,
                                127 => 8,
                                _ => 0,
                            } + if masked { 4 } else { 0 };
                    }
                    if *have >= 2 && *have == *need {
                        let left = match bytes[1] & 0x7f {
                            126 => u64::from(u16::from_be_bytes([bytes[2], bytes[3]])),
                            127 => u64::from_be_bytes(bytes[2..10].try_into().expect("8 bytes")),
                            short => u64::from(short),
                        };
                        self.state = if left == 0 {
                            FIRST_HEADER
                        } else {
                            Reading::Payload { left }
                        };
                    }
                }
                Reading::Payload { left } => {
                    let take = (*left).min((read.len() - at) as u64);
                    at += take as usize;
                    *left -= take;
                    if *left == 0 {
                        self.state = FIRST_HEADER;
                    }
                }
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for TextAsBinary<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let filled = buf.filled_mut();
            let read = &mut filled[before..];
            this.follow(read);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for TextAsBinary<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server frame (unmasked), final, with `opcode`.
    fn frame(opcode: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
        match payload.len() {
            n if n < 126 => out.push(n as u8),
            n if n <= 0xffff => {
                out.push(126);
                out.extend((n as u16).to_be_bytes());
            }
            n => {
                out.push(127);
                out.extend((n as u64).to_be_bytes());
            }
        }
        out.extend(payload);
        out
    }

    /// The upgrade answer and frames of every length form: text (one not UTF-8), a text message in two
    /// fragments, a ping between them, binary, and an empty text frame.
    fn conversation() -> (Vec<u8>, Vec<u8>) {
        let answer = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n".to_vec();
        let long = vec![b'x'; 300];
        let huge = vec![0xffu8; 70_000];
        let parts: Vec<(u8, bool, &[u8], u8)> = vec![
            (TEXT, true, b"{\"type\":\"heartbeat\"}", BINARY),
            (TEXT, true, b"\xff\xfe not UTF-8", BINARY),
            (TEXT, false, &long, BINARY),
            (0x9, true, b"ping", 0x9),
            (0x0, true, b"tail", 0x0),
            (BINARY, true, &huge, BINARY),
            (TEXT, true, b"", BINARY),
        ];
        let mut sent = answer.clone();
        let mut expected = answer;
        for (opcode, fin, payload, becomes) in parts {
            sent.extend(frame(opcode, fin, payload));
            expected.extend(frame(becomes, fin, payload));
        }
        (sent, expected)
    }

    #[test]
    fn text_frames_read_as_binary_however_the_bytes_are_split() {
        let (sent, expected) = conversation();
        for chunk in [1, 2, 3, 7, 13, 126, 4096, sent.len()] {
            let mut stream = TextAsBinary::new(());
            let mut seen = sent.clone();
            for part in seen.chunks_mut(chunk) {
                stream.follow(part);
            }
            assert_eq!(seen, expected, "read {chunk} bytes at a time");
            assert_eq!(stream.state, FIRST_HEADER, "ends between frames");
        }
    }

    #[tokio::test]
    async fn tungstenite_reads_a_text_frame_that_is_not_utf8_as_bytes() {
        use futures_util::StreamExt;
        use tokio_tungstenite::tungstenite::Message;
        use tokio_tungstenite::tungstenite::protocol::Role;
        let (sent, _) = conversation();
        let after_answer = sent.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let (client, mut server) = tokio::io::duplex(1 << 20);
        let mut wrapped = TextAsBinary::new(client);
        wrapped.state = FIRST_HEADER;
        tokio::io::AsyncWriteExt::write_all(&mut server, &sent[after_answer..])
            .await
            .unwrap();
        let mut socket =
            tokio_tungstenite::WebSocketStream::from_raw_socket(wrapped, Role::Client, None).await;
        let mut messages = Vec::new();
        for _ in 0..5 {
            messages.push(socket.next().await.unwrap().unwrap());
        }
        assert_eq!(
            messages[0],
            Message::binary(&b"{\"type\":\"heartbeat\"}"[..])
        );
        assert_eq!(messages[1], Message::binary(&b"\xff\xfe not UTF-8"[..]));
        assert!(matches!(messages[2], Message::Ping(_)));
        let mut joined = vec![b'x'; 300];
        joined.extend(b"tail");
        assert_eq!(messages[3], Message::binary(joined));
        assert_eq!(messages[4], Message::binary(vec![0xffu8; 70_000]));
    }
}
