//! What a task says to its client about a request for a person (an approval or a
//! question of one of its agents), and how the client's reply reads as the answer.

use serde_json::{json, Value};

use crate::events::{PersonAnswer, PersonRequest, RequestKind, Verdict};

/// The longest text of one line of a request's message, in characters.
const MAX_LINE: usize = 2000;

/// A message of the agent: `text`, and `data` as a data part.
pub(super) fn agent_message(text: &str, data: Option<&Value>) -> Value {
    let mut parts = vec![json!({"text": text})];
    if let Some(data) = data {
        parts.push(json!({"data": data}));
    }
    json!({
        "messageId": crate::jobs::random_id(),
        "role": "ROLE_AGENT",
        "parts": parts,
    })
}

/// The status message of a task waiting on `request`: what is asked, how to answer,
/// and the request whole as a data part.
pub(super) fn request_message(request: &PersonRequest) -> Value {
    let deadline = crate::journal::utc_text(request.deadline_ms);
    let text = match request.kind {
        RequestKind::Approval => format!(
            "Approval needed: agent {} calls `{}` with {}. It could touch: {}. Reply `approve`, `always` (approve `{}` for the rest of this task) or `deny REASON`; unanswered, it is denied at {deadline} UTC.",
            request.path,
            request.tool,
            crate::term::bounded(&request.arguments, MAX_LINE),
            request.touches.join("; "),
            request.tool,
        ),
        RequestKind::Question => format!(
            "Question from agent {}: {} Reply with the answer (unanswered, the agent goes on without one at {deadline} UTC).",
            request.path,
            request.question.as_deref().unwrap_or_default(),
        ),
    };
    let data = serde_json::to_value(request).unwrap_or(Value::Null);
    agent_message(&text, Some(&json!({"warrenRequest": data})))
}

/// The answer the client's reply (`text`, or a data part `{"verdict": …, "text": …}`)
/// gives `request`, or how to reply.
pub(super) fn reply(
    request: &PersonRequest,
    text: &str,
    data: Option<&Value>,
) -> Result<PersonAnswer, String> {
    let answer = |verdict, text: &str| PersonAnswer {
        verdict,
        text: text.trim().to_string(),
        by: "a2a".into(),
    };
    if request.kind == RequestKind::Question {
        return Ok(answer(Verdict::Answer, text));
    }
    if let Some(verdict) = data
        .and_then(|data| data.get("verdict"))
        .and_then(Value::as_str)
    {
        let reason = data
            .and_then(|data| data.get("text"))
            .and_then(Value::as_str);
        return Ok(answer(Verdict::parse(verdict)?, reason.unwrap_or_default()));
    }
    let text = text.trim();
    let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let verdict = match word.trim_end_matches([',', '.', ':', '!']).to_ascii_lowercase().as_str() {
        "approve" | "approved" | "yes" | "y" | "ok" => Verdict::Approve,
        "always" | "approve_tool" => Verdict::ApproveTool,
        "deny" | "denied" | "no" | "n" => Verdict::Deny,
        _ => {
            return Err(format!(
                "task waits for an approval of `{}` by agent {}: reply `approve`, `always` (approve `{}` for the rest of this task) or `deny REASON`, or send a data part {{\"verdict\": \"approve\" | \"approve_tool\" | \"deny\", \"text\": REASON}}",
                request.tool, request.path, request.tool
            ))
        }
    };
    Ok(answer(verdict, rest))
}

pub(super) fn verdict_text(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Approve => "approved",
        Verdict::ApproveTool => "approved for the rest of the task:",
        Verdict::Deny => "denied",
        Verdict::Answer => "answered the question of",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kind: RequestKind) -> PersonRequest {
        PersonRequest {
            id: "r1".into(),
            agent: "a1".into(),
            path: "root/a1".into(),
            kind,
            tool: "write_file".into(),
            call_id: "c1".into(),
            arguments: "{}".into(),
            touches: vec![],
            rule: vec![],
            question: Some("why?".into()),
            deadline_ms: 0,
        }
    }

    #[test]
    fn replies_read_as_verdicts_or_say_how_to_reply() {
        let approval = request(RequestKind::Approval);
        assert_eq!(
            reply(&approval, "Yes.", None).unwrap().verdict,
            Verdict::Approve
        );
        assert_eq!(
            reply(&approval, "always", None).unwrap().verdict,
            Verdict::ApproveTool
        );
        let denied = reply(&approval, "deny not in this directory", None).unwrap();
        assert_eq!(
            (denied.verdict, denied.text.as_str()),
            (Verdict::Deny, "not in this directory")
        );
        let data = json!({"verdict": "deny", "text": "no"});
        assert_eq!(
            reply(&approval, "", Some(&data)).unwrap().verdict,
            Verdict::Deny
        );
        let why = reply(&approval, "maybe later", None).unwrap_err();
        assert!(
            why.contains("`approve`") && why.contains("write_file"),
            "{why}"
        );
        let question = request(RequestKind::Question);
        let answered = reply(&question, " because ", None).unwrap();
        assert_eq!(
            (answered.verdict, answered.text.as_str()),
            (Verdict::Answer, "because")
        );
    }
}
