//! Clients of the live channels for the tests: a minimal SSE reader and WebSocket helpers.

use super::Server;
use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

/// One SSE message as the stream framed it.
#[derive(Debug, Default, Clone)]
pub struct SseEvent {
    pub event: Option<String>,
    pub id: Option<String>,
    pub data: String,
    pub retry: Option<String>,
    pub comments: Vec<String>,
}

impl SseEvent {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).expect("event data is JSON")
    }
}

/// A minimal EventSource reader over reqwest.
pub struct SseClient {
    body: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    /// Bytes as they came: a chunk may end inside a character, so only whole messages are decoded.
    buffer: Vec<u8>,
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
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        if status != 200 {
            return Err((status, response.text().await.unwrap_or_default()));
        }
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Ok(SseClient {
            body: Box::pin(response.bytes_stream()),
            buffer: Vec::new(),
        })
    }

    /// The next message, `None` when the server ended the stream.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|pair| pair == b"\n\n") {
                let bytes: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let block = String::from_utf8(bytes).expect("an SSE message is UTF-8");
                let mut event = SseEvent::default();
                for line in block.lines().filter(|line| !line.is_empty()) {
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value).to_string();
                    match field {
                        "" => event.comments.push(value),
                        "event" => event.event = Some(value),
                        "id" => event.id = Some(value),
                        "retry" => event.retry = Some(value),
                        "data" => {
                            if !event.data.is_empty() {
                                event.data.push('\n');
                            }
                            event.data.push_str(&value);
                        }
                        other => panic!("unknown SSE field `{other}`"),
                    }
                }
                return Some(event);
            }
            match tokio::time::timeout(Duration::from_secs(20), self.body.next()).await {
                Ok(Some(Ok(chunk))) => self.buffer.extend_from_slice(&chunk),
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
    server
        .url(&format!("/ws{query}"))
        .replacen("http://", "ws://", 1)
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
