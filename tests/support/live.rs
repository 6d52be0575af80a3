//! Clients of the live channels for the tests: a minimal SSE reader and WebSocket helpers.

use super::Server;
use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

pub use osds_testkit::sse::SseEvent;
use osds_testkit::sse::SseFramer;

/// A minimal EventSource reader over reqwest.
pub struct SseClient {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    /// Bytes as they came: a chunk may end inside a character, so only whole messages are decoded.
    framer: SseFramer,
}

impl SseClient {
    pub async fn connect(
        url: &str,
        last_event_id: Option<&str>,
    ) -> Result<SseClient, (u16, String)> {
        let mut request = reqwest::Client::new().get(url);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        // A server that cannot be reached answers with status 0.
        let response = request.send().await.map_err(|e| (0, e.to_string()))?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err((status, response.text().await.unwrap_or_default()));
        }
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Ok(SseClient {
            body: Box::pin(response.bytes_stream()),
            framer: SseFramer::default(),
        })
    }

    /// The next message, `None` when the server ended the stream.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(message) = self.framer.next_message() {
                let event = message.expect("an SSE message is UTF-8");
                assert!(
                    event.unknown.is_empty(),
                    "unknown SSE fields {:?}",
                    event.unknown
                );
                return Some(event);
            }
            match tokio::time::timeout(Duration::from_secs(20), self.body.next()).await {
                Ok(Some(Ok(chunk))) => self.framer.push(&chunk),
                Ok(_) => return None,
                Err(_) => panic!("no SSE data for 20 s"),
            }
        }
    }

    /// The next message that is an event (skips keep-alive comments and the bare `retry:`).
    pub async fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            let message = self.next().await?;
            if message.event.is_some() {
                return Some(message);
            }
        }
    }
}

pub type WsClient =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub fn ws_url(server: &Server, query: &str) -> String {
    server.ws_url(&format!("/ws{query}"))
}

/// The next JSON text message of a WebSocket, `None` once it closed.
pub async fn ws_next(ws: &mut WsClient) -> Option<Value> {
    loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => return Some(serde_json::from_str(&text).unwrap()),
            Ok(Some(Ok(Message::Close(_)))) | Ok(None) | Ok(Some(Err(_))) => return None,
            Ok(Some(Ok(_))) => continue,
            Err(_) => panic!("no WebSocket message for 20 s"),
        }
    }
}
