//! A session's requests for a person, asked of its MCP client: when the client
//! declares elicitation (the 2025-11-25 revision's `elicitation` capability), every
//! approval and question an agent of the session waits on is sent to it as a form
//! (`elicitation/create`), and its answer is the person's (journaled `by: mcp`).
//! A client that declines or cancels denies the call; one that does not answer
//! before the request's deadline leaves it to the deadline. A client without
//! elicitation leaves the session's requests denied at once, saying so.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::{Peer, RoleServer};
use serde_json::{json, Value};

use crate::config::AnswerPolicy;
use crate::events::{PersonAnswer, PersonRequest, RequestKind, Verdict};
use crate::jobs::Tree;

/// Whether `peer` (an initialized client) takes form elicitations.
pub(super) fn supported(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|info| info.capabilities.elicitation.is_some())
}

/// Asks `peer` every request of `tree` from now until the tree is cancelled (the
/// session ends).
pub(super) fn bridge(tree: Arc<Tree>, peer: Peer<RoleServer>) {
    tree.requests.set_policy(AnswerPolicy::Ask);
    tokio::spawn(async move {
        let mut changed = tree.requests.watch();
        let mut asked: HashSet<String> = HashSet::new();
        loop {
            for request in tree.requests.pending() {
                if asked.insert(request.id.clone()) {
                    tokio::spawn(ask(tree.clone(), peer.clone(), request));
                }
            }
            tokio::select! {
                () = tree.cancel.cancelled() => break,
                changed = changed.changed() => if changed.is_err() { break },
            }
        }
    });
}

/// Asks `peer` `request`, and answers it with what the person said.
async fn ask(tree: Arc<Tree>, peer: Peer<RoleServer>, request: PersonRequest) {
    let Some(params) = form(&request) else {
        return;
    };
    let left = request.deadline_ms.saturating_sub(crate::events::now_ms());
    let result = tokio::time::timeout(Duration::from_millis(left), peer.create_elicitation(params));
    let answer = match result.await {
        Ok(Ok(result)) => match result.action {
            ElicitationAction::Accept => accepted(&request, result.content.unwrap_or_default()),
            ElicitationAction::Decline => refused("the MCP client's user declined"),
            _ => refused("the MCP client's user cancelled the request"),
        },
        Ok(Err(error)) => {
            tracing::warn!(request = %request.id, %error, "the MCP client could not be asked; the request waits for its deadline or another answer");
            return;
        }
        // The deadline answers it.
        Err(_) => return,
    };
    if let Err(why) = tree.requests.answer(&request.id, answer) {
        tracing::info!(request = %request.id, %why, "the MCP client's answer came too late");
    }
}

/// The form `request` is asked with.
pub(super) fn form(request: &PersonRequest) -> Option<ElicitRequestParams> {
    let (message, schema) = match request.kind {
        RequestKind::Approval => (
            format!(
                "Agent {} wants to call {} with {}. It could touch: {}. Approve?",
                request.path,
                request.tool,
                request.arguments,
                request.touches.join("; ")
            ),
            json!({
                "type": "object",
                "properties": {
                    "decision": {"type": "string", "enum": ["approve", "approve_tool", "deny"],
                        "description": "approve once, approve this tool for the rest of the run, or deny"},
                    "reason": {"type": "string", "description": "why, for a denial (the agent is told)"}
                },
                "required": ["decision"]
            }),
        ),
        RequestKind::Question => (
            format!(
                "Agent {} asks: {}",
                request.path,
                request.question.as_deref().unwrap_or_default()
            ),
            json!({
                "type": "object",
                "properties": {"answer": {"type": "string", "description": "your answer"}},
                "required": ["answer"]
            }),
        ),
    };
    let requested_schema: ElicitationSchema = serde_json::from_value(schema)
        .map_err(|error| tracing::error!(%error, "the elicitation form does not parse"))
        .ok()?;
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    })
}

/// The answer in an accepted form.
pub(super) fn accepted(request: &PersonRequest, content: Value) -> PersonAnswer {
    let field = |name: &str| content[name].as_str().unwrap_or_default().to_string();
    let verdict = match request.kind {
        RequestKind::Question => Verdict::Answer,
        RequestKind::Approval => match field("decision").as_str() {
            "approve" => Verdict::Approve,
            "approve_tool" => Verdict::ApproveTool,
            _ => Verdict::Deny,
        },
    };
    let text = match request.kind {
        RequestKind::Question => field("answer"),
        RequestKind::Approval => field("reason"),
    };
    PersonAnswer {
        verdict,
        text,
        by: "mcp".into(),
    }
}

/// A denial by the client.
pub(super) fn refused(why: &str) -> PersonAnswer {
    PersonAnswer {
        verdict: Verdict::Deny,
        text: why.into(),
        by: "mcp".into(),
    }
}
