//! What one model reply may make an agent do and keep: at most
//! [`MAX_TOOL_CALLS_PER_REPLY`] tool calls are run, and at most
//! [`MAX_TURN_RESULT_BYTES`] of their results are kept in the history. Each result is
//! capped by the tool's own limit, but without these a reply of 1,000 `read_file`
//! calls on a 1 MB file made the host hold about 2 GB and send a 963 MiB request.

use std::future::Future;

use futures_util::future::join_all;

use crate::llm::ToolCall;

/// Most tool calls of one model reply that are run; the rest are answered with an
/// error saying so (every call needs a result), and not run. Room for a coordinator
/// that fans out a hundred sub-agents in one reply (the peer benchmark's workload);
/// what the calls' results may hold is bounded by [`MAX_TURN_RESULT_BYTES`].
pub(crate) const MAX_TOOL_CALLS_PER_REPLY: usize = 256;

/// Most bytes of tool results one reply's calls keep in the history; a result that
/// would pass it is replaced by an error saying so.
pub(crate) const MAX_TURN_RESULT_BYTES: usize = 4 * 1024 * 1024;

/// Runs the first [`MAX_TOOL_CALLS_PER_REPLY`] of `calls` concurrently with `execute`
/// and returns every call with the result to keep (text, whether it is an error),
/// in order, within [`MAX_TURN_RESULT_BYTES`].
pub(crate) async fn run_calls<'a, F, Fut>(
    calls: &'a [ToolCall],
    execute: F,
) -> Vec<(&'a ToolCall, String, bool)>
where
    F: Fn(&'a ToolCall) -> Fut,
    Fut: Future<Output = Result<String, String>>,
{
    let run = calls.len().min(MAX_TOOL_CALLS_PER_REPLY);
    let results = join_all(calls[..run].iter().map(execute)).await;
    let mut kept = 0;
    let mut out = Vec::with_capacity(calls.len());
    for (call, result) in calls.iter().zip(results) {
        let (content, is_error) = match result {
            Ok(output) => (output, false),
            Err(error) => (error, true),
        };
        if kept + content.len() > MAX_TURN_RESULT_BYTES {
            out.push((
                call,
                format!(
                    "{} returned {} bytes, which were dropped: the results of one reply's tool calls keep at most {MAX_TURN_RESULT_BYTES} bytes (MAX_TURN_RESULT_BYTES) and this reply's earlier calls used {kept}; call it again in a later turn, or ask for less",
                    call.name,
                    content.len()
                ),
                true,
            ));
            continue;
        }
        kept += content.len();
        out.push((call, content, is_error));
    }
    for call in &calls[run..] {
        out.push((
            call,
            format!(
                "not run: one reply may make at most {MAX_TOOL_CALLS_PER_REPLY} tool calls (MAX_TOOL_CALLS_PER_REPLY) and this one made {}; make the rest in a later turn",
                calls.len()
            ),
            true,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A reply of 1,000 calls each returning 1 MiB: 64 are run, 4 results kept, the
    /// rest answered with errors naming the limits; every call gets its answer.
    #[tokio::test]
    async fn a_reply_runs_and_keeps_at_most_its_limits() {
        let calls: Vec<ToolCall> = (0..1000)
            .map(|i| ToolCall {
                id: format!("c{i}"),
                name: "read_file".into(),
                arguments: "{}".into(),
            })
            .collect();
        let runs = AtomicUsize::new(0);
        let results = run_calls(&calls, |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            async { Ok("x".repeat(1024 * 1024)) }
        })
        .await;
        assert_eq!(runs.load(Ordering::SeqCst), MAX_TOOL_CALLS_PER_REPLY);
        assert_eq!(results.len(), 1000);
        assert!(results
            .iter()
            .zip(&calls)
            .all(|((call, _, _), original)| call.id == original.id));
        let kept: usize = results.iter().map(|(_, text, _)| text.len()).sum();
        assert!(kept <= MAX_TURN_RESULT_BYTES + 1000 * 400, "{kept}");
        assert_eq!(results.iter().filter(|(_, _, error)| !error).count(), 4);
        assert!(
            results[4].1.contains("(MAX_TURN_RESULT_BYTES)"),
            "{}",
            results[4].1
        );
        assert!(results[999].1.starts_with(&format!(
            "not run: one reply may make at most {MAX_TOOL_CALLS_PER_REPLY} tool calls (MAX_TOOL_CALLS_PER_REPLY) and this one made 1000"
        )));
    }
}
