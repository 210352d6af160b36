//! A server-sent-events parser that is fed raw chunks and remembers byte offsets, so
//! a malformed or truncated stream can be reported at its position.
//!
//! As the specification has it: lines end in `\r\n`, `\n` or a bare `\r` (a `\r` at
//! the end of a chunk waits for the next byte); `data:` with or without the space;
//! comment lines (`: keep-alive`) and `id:` / `retry:` are ignored; several `data:`
//! lines join with `\n`; a blank line dispatches the event. At the end of the body,
//! [`SseParser::finish`] dispatches a last event that had no closing blank line.
//!
//! Linear in the stream: the search for a line end resumes where the last chunk's
//! search stopped, so a long line sent in many chunks is scanned once, not once per
//! chunk (a 60 MiB `data:` line cost 150 s of CPU when it was rescanned).

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
    /// The event being read.
    pending: Pending,
    /// The last line ended with `\r`: a `\n` right after it belongs to that end.
    after_cr: bool,
    /// How many bytes at the start of `partial` hold no line end: the next search
    /// starts after them.
    scanned: usize,
    /// Bytes the line-end search has looked at, to check it stays linear.
    #[cfg(any(test, fuzzing))]
    pub(crate) examined: usize,
}

/// The fields of the event being read, kept apart from the line buffer so a line can
/// be read borrowed from that buffer.
#[derive(Debug, Default)]
struct Pending {
    /// The `event:` field.
    event: Option<String>,
    /// Data lines, already joined with `\n`.
    data: String,
    /// Whether `data` holds a line (one empty line and none differ).
    has_data: bool,
    /// Offset of the event, once it has a field.
    offset: Option<usize>,
}

impl SseParser {
    /// Feeds a chunk; returns the events it completed.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.partial.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut start = 0;
        if self.after_cr && self.partial.first() == Some(&b'\n') {
            start = 1;
        }
        if !self.partial.is_empty() {
            self.after_cr = false;
        }
        let mut search = start.max(self.scanned);
        while let Some(found) = self.line_end(search) {
            let end = search + found;
            let mut next = end + 1;
            if self.partial[end] == b'\r' {
                match self.partial.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    // `\r` last in the buffer: its line is complete, and a `\n`
                    // opening the next chunk is part of the same line end.
                    None => self.after_cr = true,
                }
            }
            self.pending.line(
                &text(&self.partial[start..end]),
                self.offset + start,
                &mut events,
            );
            start = next;
            search = next;
        }
        self.partial.drain(..start);
        self.offset += start;
        self.scanned = self.partial.len();
        events
    }

    /// Where the first `\n` or `\r` at or after `from` in `partial` is, counted from
    /// `from`.
    fn line_end(&mut self, from: usize) -> Option<usize> {
        let found = self.partial[from..]
            .iter()
            .position(|b| *b == b'\n' || *b == b'\r');
        #[cfg(any(test, fuzzing))]
        {
            self.examined += found.map_or(self.partial.len() - from, |at| at + 1);
        }
        found
    }

    /// At the end of the body: the last line even without its line end, and the event
    /// being read even without its blank line.
    pub(crate) fn finish(&mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if !self.partial.is_empty() {
            self.pending
                .line(&text(&self.partial), self.offset, &mut events);
            self.offset += self.partial.len();
            self.partial.clear();
            self.scanned = 0;
        }
        self.pending.line("", self.offset, &mut events);
        events
    }

    /// At end of stream: the offset and bytes of an unfinished event, if any (what
    /// [`SseParser::finish`] would have to complete).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn unfinished(&self) -> Option<(usize, String)> {
        if let Some(offset) = self.pending.offset {
            return Some((
                offset,
                self.pending.data.clone() + &String::from_utf8_lossy(&self.partial),
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

impl Pending {
    /// Reads one line at stream offset `line_offset`; a blank line completes the event.
    fn line(&mut self, line: &str, line_offset: usize, events: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if let Some(offset) = self.offset.take() {
                events.push(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data),
                    offset,
                });
                self.has_data = false;
            }
        } else if !line.starts_with(':') {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "data" => {
                    self.offset.get_or_insert(line_offset);
                    if self.has_data {
                        self.data.push('\n');
                    }
                    self.data.push_str(value);
                    self.has_data = true;
                }
                "event" => {
                    self.offset.get_or_insert(line_offset);
                    self.event = Some(value.to_string());
                }
                _ => {}
            }
        }
    }
}

/// A line as text: borrowed when it is UTF-8 (checked with the standard library's
/// fast validation), with U+FFFD for invalid bytes otherwise.
fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
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
    fn line_ends_of_every_kind_and_a_last_event_without_its_blank_line() {
        let stream = b"data: a\r\rdata:b\r\n\r\n: keep-alive\nid: 7\nretry: 10\ndata: c\ndata: d\n\nevent: last\ndata: {\"end\":true}";
        for size in 1..stream.len() {
            let mut parser = SseParser::default();
            let mut events = Vec::new();
            for chunk in stream.chunks(size) {
                events.extend(parser.push(chunk));
            }
            events.extend(parser.finish());
            let data: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
            assert_eq!(
                data,
                ["a", "b", "c\nd", "{\"end\":true}"],
                "chunks of {size}"
            );
            assert_eq!(events[3].event.as_deref(), Some("last"));
        }
    }

    #[test]
    fn invalid_utf8_becomes_the_replacement_character() {
        let mut parser = SseParser::default();
        let events = parser.push(b"data: a\xffb\n\ndata: ok\n\n");
        let data: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["a\u{FFFD}b", "ok"]);
    }

    /// A 64 KiB `data:` line in 16-byte chunks, then a line of 16-byte chunks each
    /// ending a line: every byte is looked at once. Rescanning the unfinished line on
    /// every chunk looked at 134 million.
    #[test]
    fn the_line_end_search_looks_at_each_byte_once() {
        let mut parser = SseParser::default();
        let mut stream = b"data: ".to_vec();
        stream.extend(std::iter::repeat_n(b'x', 64 * 1024));
        stream.extend_from_slice(b"\n\n");
        for _ in 0..4096 {
            stream.extend_from_slice(b"data: 0123456\n\n");
        }
        let mut events = 0;
        for chunk in stream.chunks(16) {
            events += parser.push(chunk).len();
        }
        assert_eq!(events, 4097);
        assert!(
            parser.examined <= stream.len(),
            "looked at {} bytes of a {}-byte stream",
            parser.examined,
            stream.len()
        );
    }

    #[test]
    fn a_cut_event_is_reported_with_its_offset() {
        let mut parser = SseParser::default();
        parser.push(b"data: whole\n\ndata: {\"cut");
        assert_eq!(parser.unfinished(), Some((13, "data: {\"cut".into())));
    }
}
