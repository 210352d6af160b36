//! What every MCP session serves with: its options, and the shape a call's answer
//! takes for the client (a session's calls and its tasks' give the same).

use rmcp::model::{CallToolResult, ContentBlock};

use crate::host::Answer;

/// How long an `await_agents` call without `timeout_s` waits at most, unless the
/// operator says otherwise (`warren mcp --await-limit`): under the shortest common
/// client timeout (the OpenAI Agents SDK's 5 s session timeout), so a client gets the
/// blocks of agents still running instead of timing out.
pub(crate) const DEFAULT_AWAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(4);

/// What every session gets.
#[derive(Clone, Debug)]
pub(crate) struct SessionOptions {
    /// The profile every session runs under (`None`: `main`).
    pub profile: Option<String>,
    /// How long `await_agents` without `timeout_s` waits at most
    /// ([`DEFAULT_AWAIT_LIMIT`] unless set).
    pub await_limit: std::time::Duration,
}

/// The `CallToolResult` of a call that ended with `result`: its text, and for the
/// spawn tools their typed answers as `structuredContent` (when the profile fixes a
/// schema, the spawn tools declare `Session::results_schema` and every result of
/// theirs carries it: a background spawn's job, queued).
pub(super) fn tool_result(result: Result<Answer, String>) -> CallToolResult {
    match result {
        Ok(answer) => {
            let mut result = CallToolResult::success(vec![ContentBlock::text(answer.text)]);
            result.structured_content = answer.structured;
            result
        }
        Err(reason) => CallToolResult::error(vec![ContentBlock::text(reason)]),
    }
}
