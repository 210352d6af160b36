//! The Anthropic stream assembly on an arbitrary response body: it never panics (errors
//! are fine), and an assembled response agrees with what was streamed on the way:
//! the text deltas add up to its text, the tool-call events are its tool calls, the
//! last usage event is its usage and the last event is its finish reason.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warren::fuzzing::{anthropic_stream, StreamEvent};
use warren::Usage;

fuzz_target!(|body: &[u8]| {
    let outcome = anthropic_stream(body);
    let Ok(response) = outcome.result else {
        return;
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut usage = Usage::default();
    for event in &outcome.events {
        match event {
            StreamEvent::TextDelta(piece) => text.push_str(piece),
            StreamEvent::ToolCall(call) => calls.push(call.clone()),
            StreamEvent::Usage(reported) => usage = *reported,
            StreamEvent::Finish(_) => {}
        }
    }
    assert_eq!(text, response.message.text);
    assert_eq!(calls, response.message.tool_calls);
    assert_eq!(usage, response.usage);
    assert_eq!(
        outcome.events.last(),
        Some(&StreamEvent::Finish(response.finish.clone()))
    );
});
