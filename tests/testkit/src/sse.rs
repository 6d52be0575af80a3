//! Server-Sent Events as a client reads them: a byte stream split into messages at blank lines (a chunk may
//! end anywhere, even inside a character), and one message parsed into its fields.

use serde_json::Value;

/// One SSE message.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub id: Option<String>,
    /// The `data:` lines joined by line breaks.
    pub data: String,
    pub retry: Option<String>,
    /// Comment lines (`: text`), as keep-alives and closing reasons are sent.
    pub comments: Vec<String>,
    /// Fields the SSE specification does not define (none are expected from osds).
    pub unknown: Vec<String>,
}

impl SseEvent {
    /// Parses one message (its lines, without the blank line that ended it).
    pub fn parse(message: &str) -> SseEvent {
        let mut event = SseEvent::default();
        for line in message.lines().filter(|line| !line.is_empty()) {
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
                other => event.unknown.push(other.to_string()),
            }
        }
        event
    }

    /// The data as JSON.
    pub fn try_json(&self) -> serde_json::Result<Value> {
        serde_json::from_str(&self.data)
    }

    /// The data as JSON; panics when it is not (for tests, where that is a failure).
    pub fn json(&self) -> Value {
        self.try_json().expect("SSE event data is JSON")
    }
}

/// Splits the bytes of an event stream into messages.
#[derive(Debug, Default)]
pub struct SseFramer {
    buffer: Vec<u8>,
}

impl SseFramer {
    /// Adds the next bytes of the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next complete message, if one has arrived; an error when it is not UTF-8.
    pub fn next_message(&mut self) -> Option<Result<SseEvent, std::string::FromUtf8Error>> {
        let end = self.buffer.windows(2).position(|pair| pair == b"\n\n")?;
        let bytes: Vec<u8> = self.buffer.drain(..end + 2).collect();
        Some(String::from_utf8(bytes).map(|text| SseEvent::parse(&text)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_split_at_blank_lines_even_inside_a_character() {
        let mut framer = SseFramer::default();
        let text = "event: report\ndata: {\"e\":\"地震\"}\nid: 7\n\n: keep-alive\n\nevent: x";
        let bytes = text.as_bytes();
        // Cut inside the three-byte character.
        let cut = text.find('震').unwrap() + 1;
        framer.push(&bytes[..cut]);
        assert!(framer.next_message().is_none());
        framer.push(&bytes[cut..]);
        let first = framer.next_message().unwrap().unwrap();
        assert_eq!(first.event.as_deref(), Some("report"));
        assert_eq!(first.id.as_deref(), Some("7"));
        assert_eq!(first.json()["e"], "地震");
        let second = framer.next_message().unwrap().unwrap();
        assert_eq!(second.comments, ["keep-alive"]);
        assert!(
            framer.next_message().is_none(),
            "the last message is not complete"
        );
    }

    #[test]
    fn data_lines_join_and_unknown_fields_are_kept() {
        let event = SseEvent::parse("data: a\ndata: b\nretry: 3000\nfoo: bar\n");
        assert_eq!(event.data, "a\nb");
        assert_eq!(event.retry.as_deref(), Some("3000"));
        assert_eq!(event.unknown, ["foo"]);
    }
}
