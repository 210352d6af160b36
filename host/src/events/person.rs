//! What an agent asks of a person and what the person answers: the request an
//! approval or a question waits on, and its answer with where it came from. The
//! journal's records and the bus's events carry these as they are.

use serde::{Deserialize, Serialize};

/// What an agent asks a person for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// A yes for one tool call its profile's `approval` rule names.
    Approval,
    /// An answer to a question (`ask_person`).
    Question,
}

impl RequestKind {
    /// The state of an agent waiting on a request of this kind, as tables, JSON and
    /// the views name it: the one rendering.
    pub fn waiting_state(self) -> &'static str {
        match self {
            RequestKind::Approval => "awaiting_approval",
            RequestKind::Question => "awaiting_answer",
        }
    }
}

/// A request for a person's answer: an approval of a tool call, or a question. Its
/// journal record and its event carry it whole (its arguments too: what a person
/// approves is exactly what runs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PersonRequest {
    /// Its id in the run (the same after a resume).
    pub id: String,
    /// The asking agent's id.
    pub agent: String,
    /// Where it sits: the ids from the root down to it, joined with `/`.
    pub path: String,
    /// Approval or question.
    pub kind: RequestKind,
    /// The tool called (`ask_person` for a question).
    pub tool: String,
    /// The model's call id.
    pub call_id: String,
    /// The call's arguments, exactly.
    pub arguments: String,
    /// What the call could touch (the agent's grants, the network), for an approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub touches: Vec<String>,
    /// Which entries of the approval rule it matched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rule: Vec<String>,
    /// The question, for a question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// When it is denied (or a question goes unanswered) if nobody answers, in ms
    /// since the Unix epoch.
    pub deadline_ms: u64,
}

/// What a person decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The call runs, once.
    Approve,
    /// The call runs, and every later call of the same tool in the run needs no
    /// approval.
    ApproveTool,
    /// The call does not run; the model is told why.
    Deny,
    /// A question's answer.
    Answer,
}

impl Verdict {
    /// How `warren approve`, the web view and the control socket spell it.
    pub fn parse(text: &str) -> Result<Verdict, String> {
        match text.trim() {
            "approve" | "yes" => Ok(Verdict::Approve),
            "approve_tool" | "always" => Ok(Verdict::ApproveTool),
            "deny" | "no" => Ok(Verdict::Deny),
            "answer" => Ok(Verdict::Answer),
            other => Err(format!(
                "the decision must be \"approve\", \"approve_tool\", \"deny\" or \"answer\", not \"{other}\""
            )),
        }
    }

    /// Whether the call goes ahead.
    pub fn approves(self) -> bool {
        matches!(self, Verdict::Approve | Verdict::ApproveTool)
    }
}

/// A person's answer to a request, and where it came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PersonAnswer {
    /// What was decided.
    pub verdict: Verdict,
    /// A denial's reason, or a question's answer (may be empty).
    #[serde(default)]
    pub text: String,
    /// Who or what answered: `terminal`, `cli:NAME`, `web`, `mcp`, the `--approve`
    /// policy, or `deadline`.
    pub by: String,
}

/// A request answered: whose, which, and the answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Answered {
    /// The asking agent.
    pub agent: String,
    /// The request's id.
    pub request: String,
    /// The answer and who gave it.
    #[serde(flatten)]
    pub answer: PersonAnswer,
}
