//! The live wire format, framed once and shared by the handlers (`live/`), the live ring (`live/recent.rs`) and
//! the sockets that write it (`net/socket.rs`): SSE events and HTTP/1.1 chunks, WebSocket text frames, and a
//! committed report in both forms.

use axum::extract::ws::Utf8Bytes;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;
use std::sync::{Arc, OnceLock};

/// One framed event: `event:`, one `data:` line per line of `data`, `id:` when given.
pub fn event(name: &str, id: Option<i64>, data: &str) -> Bytes {
    let mut frame = BytesMut::with_capacity(name.len() + data.len() + 40);
    frame.put_slice(b"event: ");
    frame.put_slice(name.as_bytes());
    frame.put_u8(b'\n');
    // A line break (LF, CRLF or CR) inside the data would end the field: each line gets its own `data:` field.
    let normalized;
    let data = if data.contains('\r') {
        normalized = data.replace("\r\n", "\n").replace('\r', "\n");
        &normalized
    } else {
        data
    };
    for line in data.split('\n') {
        frame.put_slice(b"data: ");
        frame.put_slice(line.as_bytes());
        frame.put_u8(b'\n');
    }
    if let Some(id) = id {
        frame.put_slice(format!("id: {id}\n").as_bytes());
    }
    frame.put_u8(b'\n');
    frame.freeze()
}

/// `data` as one chunk of a chunked HTTP/1.1 body (RFC 9112 §7.1).
pub fn http_chunk(data: &[u8]) -> Bytes {
    let mut chunk = BytesMut::with_capacity(data.len() + 20);
    put_http_chunk(&mut chunk, data);
    chunk.freeze()
}

/// Appends `data` as one chunk of a chunked HTTP/1.1 body.
pub fn put_http_chunk(into: &mut BytesMut, data: &[u8]) {
    into.reserve(data.len() + 20);
    into.put_slice(format!("{:X}\r\n", data.len()).as_bytes());
    into.put_slice(data);
    into.put_slice(b"\r\n");
}

/// The last chunk of a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

pub fn json_event(name: &str, data: &Value) -> Bytes {
    event(name, None, &data.to_string())
}

/// A comment (never shown to an EventSource listener); line breaks become spaces.
pub fn comment(text: &str) -> Bytes {
    Bytes::from(format!(": {}\n\n", text.replace(['\r', '\n'], " ")))
}

/// One committed report, ready to send: both forms are shared by every consumer, not copied per connection.
#[derive(Debug)]
pub struct Rendered {
    pub id: i64,
    /// Its channel, for the `source` filter.
    pub source: Arc<str>,
    /// The SSE `report` event, framed (`event:`, `data:`, `id:` lines).
    pub sse_event: Bytes,
    /// The WebSocket `report` message.
    pub ws_text: Utf8Bytes,
    /// Both as the hub writes them to sockets, framed on first use.
    sse_chunk: OnceLock<Bytes>,
    ws_frame: OnceLock<Bytes>,
}

impl Rendered {
    /// Report version `id` of channel `source`, whose `EewReport` text is `json`.
    pub fn new(id: i64, source: Arc<str>, json: &str) -> Rendered {
        let ws_text = format!("{{\"type\":\"report\",\"id\":{id},\"data\":{json}}}");
        Rendered {
            id,
            source,
            sse_event: event("report", Some(id), json),
            ws_text: ws_text.into(),
            sse_chunk: OnceLock::new(),
            ws_frame: OnceLock::new(),
        }
    }

    /// Roughly what it holds: both texts, and both again once framed for the sockets.
    pub fn bytes(&self) -> usize {
        2 * (self.sse_event.len() + self.ws_text.len())
    }

    /// The SSE event as one chunk of a chunked HTTP/1.1 body.
    pub fn sse_chunk(&self) -> &Bytes {
        self.sse_chunk.get_or_init(|| http_chunk(&self.sse_event))
    }

    /// The WebSocket message as one unmasked text frame (RFC 6455 §5.2), as a server sends it.
    pub fn ws_frame(&self) -> &Bytes {
        self.ws_frame.get_or_init(|| {
            let payload = self.ws_text.as_bytes();
            let mut frame = BytesMut::with_capacity(payload.len() + 10);
            // FIN, opcode 1 (text).
            frame.put_u8(0x81);
            match payload.len() {
                len @ 0..=125 => frame.put_u8(len as u8),
                len @ 126..=0xFFFF => {
                    frame.put_u8(126);
                    frame.put_u16(len as u16);
                }
                len => {
                    frame.put_u8(127);
                    frame.put_u64(len as u64);
                }
            }
            frame.put_slice(payload);
            frame.freeze()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(json: String) -> Rendered {
        Rendered::new(9, "sc".into(), &json)
    }

    #[test]
    fn websocket_frames_carry_the_text_with_the_length_in_the_rfc_6455_form() {
        for (size, header) in [
            (10, vec![0x81, 0]),
            (300, vec![0x81, 126, 0, 0]),
            (70_000, vec![0x81, 127, 0, 0, 0, 0, 0, 0, 0, 0]),
        ] {
            let r = rendered(format!("\"{}\"", "x".repeat(size)));
            let text = r.ws_text.as_bytes();
            let frame = r.ws_frame();
            let mut header = header;
            match header.len() {
                2 => header[1] = text.len() as u8,
                4 => header[2..4].copy_from_slice(&(text.len() as u16).to_be_bytes()),
                _ => header[2..10].copy_from_slice(&(text.len() as u64).to_be_bytes()),
            }
            assert_eq!(&frame[..header.len()], &header[..], "{size}");
            assert_eq!(&frame[header.len()..], text);
        }
    }

    #[test]
    fn sse_chunks_are_the_event_with_its_hex_length() {
        let r = rendered("{}".to_string());
        let chunk = r.sse_chunk();
        let head = format!("{:X}\r\n", r.sse_event.len());
        assert_eq!(&chunk[..head.len()], head.as_bytes());
        assert_eq!(&chunk[head.len()..chunk.len() - 2], &r.sse_event[..]);
        assert!(chunk.ends_with(b"\r\n"));
    }

    #[test]
    fn events_frame_each_data_line_and_the_id() {
        assert_eq!(
            event("report", Some(7), r#"{"a":1}"#),
            Bytes::from_static(b"event: report\ndata: {\"a\":1}\nid: 7\n\n")
        );
        assert_eq!(
            event("status", None, "one\r\ntwo\nthree\rfour"),
            Bytes::from_static(b"event: status\ndata: one\ndata: two\ndata: three\ndata: four\n\n")
        );
        assert_eq!(comment("a\nb"), Bytes::from_static(b": a b\n\n"));
    }
}
