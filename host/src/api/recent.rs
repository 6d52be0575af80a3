//! The reports committed lately, read from the archive once and rendered once for every live consumer. Without
//! it each of N subscribers ran its own query and re-serialised the same report after every commit; with it a
//! commit costs one read, and each consumer copies the ready text. Only committed reports enter (the reader
//! never reads past the published horizon), in id order, and the ring knows exactly which id range it covers,
//! so a consumer whose cursor lies inside that range gets every later report from it, gap-free; one whose
//! cursor is older reads the archive as before.

use super::live::sse;
use crate::store::{ReportItem, Store};
use axum::extract::ws::Utf8Bytes;
use bytes::{BufMut, Bytes, BytesMut};
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock, RwLock};
use tokio::sync::watch;

/// Reports kept: enough for any consumer that keeps up, small enough to be cheap (~2 kB each).
const CAPACITY: usize = 4096;
/// Reports read per query while filling.
const READ_BATCH: i64 = 1000;

/// One committed report, ready to send: both forms are shared by every consumer, not copied per connection.
#[derive(Debug)]
pub struct Rendered {
    pub id: i64,
    /// The SSE `report` event, framed (`event:`, `data:`, `id:` lines).
    pub sse_event: Bytes,
    /// The WebSocket `report` message.
    pub ws_text: Utf8Bytes,
    /// Both as the hub writes them to sockets, framed on first use.
    sse_chunk: OnceLock<Bytes>,
    ws_frame: OnceLock<Bytes>,
}

impl Rendered {
    pub fn new(report: ReportItem) -> Rendered {
        let ws_text = format!(
            "{{\"type\":\"report\",\"id\":{},\"data\":{}}}",
            report.id, report.json
        );
        Rendered {
            id: report.id,
            sse_event: sse::event("report", Some(report.id), &report.json),
            ws_text: ws_text.into(),
            sse_chunk: OnceLock::new(),
            ws_frame: OnceLock::new(),
        }
    }

    /// The SSE event as one chunk of a chunked HTTP/1.1 body.
    pub fn sse_chunk(&self) -> &Bytes {
        self.sse_chunk
            .get_or_init(|| sse::http_chunk(&self.sse_event))
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

#[derive(Default)]
struct Ring {
    /// Every committed report with `covered_after < id <= upto` is in `entries`, in id order.
    covered_after: i64,
    upto: i64,
    entries: VecDeque<Arc<Rendered>>,
}

pub struct RecentReports {
    store: Store,
    ring: RwLock<Ring>,
    /// Held by the one consumer that reads the archive into the ring.
    filling: tokio::sync::Mutex<()>,
    /// Counts finished fills (successful or not), so consumers that found a fill under way all wake at once
    /// when it ends instead of queueing on `filling` one after another.
    fills_done: watch::Sender<u64>,
}

impl RecentReports {
    /// An empty ring that starts covering at `high_water` (the horizon at start: later commits enter).
    pub fn new(store: Store, high_water: i64) -> RecentReports {
        RecentReports {
            store,
            ring: RwLock::new(Ring {
                covered_after: high_water,
                upto: high_water,
                entries: VecDeque::new(),
            }),
            filling: tokio::sync::Mutex::new(()),
            fills_done: watch::Sender::new(0),
        }
    }

    /// Up to `limit` reports after `cursor`, or `None` when the ring does not cover the cursor (the caller
    /// reads the archive). `horizon` is a committed horizon; the ring is filled up to it first, by one consumer
    /// for all.
    pub async fn after(
        &self,
        cursor: i64,
        horizon: i64,
        limit: usize,
    ) -> anyhow::Result<Option<Vec<Arc<Rendered>>>> {
        if self.read().covered_after > cursor {
            return Ok(None);
        }
        self.fill(horizon).await?;
        let ring = self.read();
        if ring.covered_after > cursor {
            return Ok(None);
        }
        let start = ring.entries.partition_point(|r| r.id <= cursor);
        Ok(Some(
            ring.entries.range(start..).take(limit).cloned().collect(),
        ))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Ring> {
        self.ring
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes the ring reach `horizon`: reads the archive if no one else is, else waits for that reader.
    async fn fill(&self, horizon: i64) -> anyhow::Result<()> {
        if self.read().upto >= horizon {
            return Ok(());
        }
        loop {
            // Subscribed before looking, so a fill that ends from here on wakes this consumer.
            let mut done = self.fills_done.subscribe();
            if self.read().upto >= horizon {
                return Ok(());
            }
            match self.filling.try_lock() {
                Ok(guard) => {
                    let filled = self.read_into_ring(horizon).await;
                    drop(guard);
                    self.fills_done.send_modify(|n| *n = n.wrapping_add(1));
                    return filled;
                }
                Err(_) => {
                    // The sender lives as long as `self`.
                    let _ = done.changed().await;
                }
            }
        }
    }

    async fn read_into_ring(&self, horizon: i64) -> anyhow::Result<()> {
        loop {
            let upto = self.read().upto;
            if upto >= horizon {
                return Ok(());
            }
            let items = self
                .store
                .reports_between(upto, horizon, READ_BATCH)
                .await?;
            // Everything up to the horizon was read, unless the batch was full.
            let reached = match items.last() {
                Some(last) if items.len() as i64 == READ_BATCH => last.id,
                _ => horizon,
            };
            let rendered = items.into_iter().map(|r| Arc::new(Rendered::new(r)));
            let mut ring = self.ring.write().unwrap_or_else(|p| p.into_inner());
            ring.entries.extend(rendered);
            ring.upto = reached;
            while ring.entries.len() > CAPACITY {
                if let Some(gone) = ring.entries.pop_front() {
                    ring.covered_after = gone.id;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(json: String) -> Rendered {
        Rendered::new(ReportItem {
            id: 9,
            json: json.into(),
            digest: [0; 8],
        })
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
}
