//! The SSE parser on arbitrary bytes: it never panics; it yields the same events,
//! offsets and leftover however the stream is cut into chunks (a `\r\n` split across
//! chunks included); offsets increase; and the end of the body dispatches at most the
//! one event `unfinished` reported; and the line-end search looks at each byte at most
//! once, however small the chunks (a parser that rescans an unfinished line on every
//! chunk is quadratic). The first 4 input bytes choose the chunk sizes
//! (each `b % 64 + 1`, cycled); the rest is the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warren::fuzzing::{sse, SseOutcome};

fuzz_target!(|data: &[u8]| {
    let (sizes, stream) = data.split_at(data.len().min(4));
    let whole = sse([stream]);

    let mut chunks = Vec::new();
    let mut rest = stream;
    for size in sizes.iter().map(|b| usize::from(b % 64) + 1).cycle() {
        if rest.is_empty() {
            break;
        }
        let (chunk, tail) = rest.split_at(size.min(rest.len()));
        chunks.push(chunk);
        rest = tail;
    }
    let chunked = sse(chunks);
    for outcome in [&whole, &chunked] {
        assert!(
            outcome.examined <= stream.len(),
            "the parser looked at {} bytes of a {}-byte stream",
            outcome.examined,
            stream.len()
        );
    }
    let (whole, chunked) = (
        SseOutcome {
            examined: 0,
            ..whole
        },
        SseOutcome {
            examined: 0,
            ..chunked
        },
    );
    assert_eq!(whole, chunked, "chunking changed the parse");

    assert_eq!(whole.position, stream.len());
    let offsets: Vec<usize> = whole.events.iter().map(|e| e.2).collect();
    assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "offsets not increasing: {offsets:?}"
    );
    assert!(offsets.iter().all(|o| *o < stream.len()));
    match &whole.unfinished {
        None => assert_eq!(whole.finished, 0),
        Some((offset, _)) => {
            assert!(whole.finished <= 1);
            if whole.finished == 1 {
                assert_eq!(offsets.last(), Some(offset));
            }
        }
    }
});
