//! A server-sent-events parser that is fed raw chunks and remembers byte offsets, so
//! a malformed or truncated stream can be reported at its position.

/// One dispatched event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, if any.
    pub(crate) event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub(crate) data: String,
    /// Byte offset of the event's first line in the stream.
    pub(crate) offset: usize,
}

/// Incremental parser state.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// Bytes not yet forming a whole line.
    partial: Vec<u8>,
    /// Stream offset of `partial[0]`.
    offset: usize,
    /// Fields of the event being read.
    event: Option<String>,
    /// Data lines of the event being read.
    data: Vec<String>,
    /// Offset of the event being read, once it has a field.
    event_offset: Option<usize>,
}

impl SseParser {
    /// Feeds a chunk; returns the events it completed.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.partial.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(newline) = self.partial[start..].iter().position(|b| *b == b'\n') {
            let end = start + newline;
            let line = String::from_utf8_lossy(&self.partial[start..end]);
            let line = line.strip_suffix('\r').unwrap_or(&line);
            let line_offset = self.offset + start;
            if line.is_empty() {
                if let Some(offset) = self.event_offset.take() {
                    events.push(SseEvent {
                        event: self.event.take(),
                        data: self.data.join("\n"),
                        offset,
                    });
                    self.data.clear();
                }
            } else if !line.starts_with(':') {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                self.event_offset.get_or_insert(line_offset);
                match field {
                    "data" => self.data.push(value.to_string()),
                    "event" => self.event = Some(value.to_string()),
                    _ => {}
                }
            }
            start = end + 1;
        }
        self.partial.drain(..start);
        self.offset += start;
        events
    }

    /// At end of stream: the offset and bytes of an unfinished event, if any.
    pub(crate) fn unfinished(&self) -> Option<(usize, String)> {
        if let Some(offset) = self.event_offset {
            return Some((
                offset,
                self.data.join("\n") + &String::from_utf8_lossy(&self.partial),
            ));
        }
        (!self.partial.iter().all(u8::is_ascii_whitespace)).then(|| {
            (
                self.offset,
                String::from_utf8_lossy(&self.partial).into_owned(),
            )
        })
    }

    /// Bytes consumed so far.
    pub(crate) fn position(&self) -> usize {
        self.offset + self.partial.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_with_offsets() {
        let mut parser = SseParser::default();
        let stream = b"event: a\ndata: {\"x\":\r\ndata: 1}\n\n: comment\n\ndata: two\n\n";
        let mut events = Vec::new();
        for byte in stream.chunks(3) {
            events.extend(parser.push(byte));
        }
        assert_eq!(events.len(), 2);
        assert_eq!(
            events[0],
            SseEvent {
                event: Some("a".into()),
                data: "{\"x\":\n1}".into(),
                offset: 0
            }
        );
        assert_eq!(events[1].data, "two");
        assert_eq!(events[1].offset, 43);
        assert_eq!(parser.unfinished(), None);
    }

    #[test]
    fn a_cut_event_is_reported_with_its_offset() {
        let mut parser = SseParser::default();
        parser.push(b"data: whole\n\ndata: {\"cut");
        assert_eq!(parser.unfinished(), Some((13, "data: {\"cut".into())));
    }
}
