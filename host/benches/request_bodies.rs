//! Encoding a parent's request body: the history a root agent carries after spawning
//! 1000 sub-agents (1000 `spawn_agent` calls, each answered with a job id, in turns of
//! ten), with the spawn tools, for both HTTP providers. Each is timed against its
//! reference, the same body as a `serde_json::Value` tree built and then serialised
//! (how request bodies were made before they were serialised straight from the history).
//!
//! Run with: `cargo bench --bench request_bodies`

use std::time::{Duration, Instant};

use warren::{AssistantMessage, ChatRequest, Message, ToolCall};

const SPAWNS: usize = 1000;
const PER_TURN: usize = 10;
const RUNS: usize = 30;

/// The root's history after `SPAWNS` spawns.
fn history() -> ChatRequest {
    let mut messages = vec![Message::User("Gather what the three topics say.".into())];
    for turn in 0..SPAWNS / PER_TURN {
        let calls: Vec<ToolCall> = (0..PER_TURN)
            .map(|n| ToolCall {
                id: format!("call_{turn}_{n}"),
                name: "spawn_agent".into(),
                arguments: format!(
                    r#"{{"task":"Read /docs/topic{}.txt and report its code word","profile":"researcher","description":"topic {n}"}}"#,
                    n % 3 + 1
                ),
            })
            .collect();
        messages.push(Message::Assistant(AssistantMessage {
            text: format!("Spawning round {turn}."),
            tool_calls: calls.clone(),
            ..AssistantMessage::default()
        }));
        for call in calls {
            messages.push(Message::ToolResult {
                content: format!(
                    "Started job {}-{turn}. You will be notified when it finishes.",
                    call.id
                ),
                call_id: call.id,
                name: call.name,
                is_error: false,
            });
        }
    }
    ChatRequest {
        system: "You coordinate researchers.".into(),
        messages,
        ..ChatRequest::default()
    }
}

/// Median of `RUNS` timings of `f`.
fn median(mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

fn report(provider: &str, messages: usize, body: impl Fn() -> bytes::Bytes) {
    let bytes = body();
    let direct = median(|| {
        std::hint::black_box(body());
    });
    let tree: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    // The reference: the same body built as a tree (here cloned from one, which is
    // cheaper than building it from the history) and serialised.
    let via_tree = median(|| {
        let built = std::hint::black_box(&tree).clone();
        std::hint::black_box(serde_json::to_vec(&built).unwrap());
    });
    println!(
        "{provider:<9} body of {messages} messages ({} KiB): {:>6.0} µs straight from the history, {:>6.0} µs as a Value tree ({:.1}x)",
        bytes.len() / 1024,
        direct.as_secs_f64() * 1e6,
        via_tree.as_secs_f64() * 1e6,
        via_tree.as_secs_f64() / direct.as_secs_f64()
    );
}

fn main() {
    let request = history();
    let messages = request.messages.len();
    for provider in ["openai", "anthropic"] {
        let encode = warren::request_encoder(provider).unwrap();
        report(provider, messages, || encode(&request));
    }
}
