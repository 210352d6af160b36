//! A run's requests for a person: the approvals and questions its agents wait on, the
//! tools a person approved for the rest of the run, and who answers when nobody is
//! asked (the run's [`AnswerPolicy`]). A request is opened by the agent that waits
//! (which journals it first), answered from any route (the terminal, `warren
//! approve` through the control socket, the web view, an MCP client) and closed when
//! its agent stops waiting, answered or not. Bounded: at most
//! `[defaults] max_pending_requests` wait at once in one run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use tokio::sync::{oneshot, watch};

use crate::config::AnswerPolicy;
use crate::events::{PersonAnswer, PersonRequest, Verdict};

/// One waiting request and where its answer goes.
struct Pending {
    request: PersonRequest,
    answer: oneshot::Sender<PersonAnswer>,
}

/// A run's requests for a person.
pub(crate) struct Requests {
    pending: Mutex<BTreeMap<String, Pending>>,
    /// Tools approved for the rest of the run.
    approved: Mutex<BTreeSet<String>>,
    /// Who answers when nobody is asked.
    policy: Mutex<AnswerPolicy>,
    /// Bumped whenever a request opens or closes: what a terminal prompt watches.
    changed: watch::Sender<u64>,
    /// At most this many wait at once.
    max_pending: usize,
}

/// What [`Requests::open`] gave: the answer to wait for, or why the request cannot
/// wait.
pub(crate) enum Opened {
    /// Waiting: the answer comes here (dropped unanswered when the request closes).
    Waiting(oneshot::Receiver<PersonAnswer>),
    /// The policy answered at once.
    Answered(PersonAnswer),
    /// The run holds as many waiting requests as it may.
    Full(String),
}

impl Requests {
    /// No requests; at most `max_pending` may wait, and `policy` answers when nobody
    /// is asked.
    pub(crate) fn new(max_pending: usize, policy: AnswerPolicy) -> Requests {
        Requests {
            pending: Mutex::default(),
            approved: Mutex::default(),
            policy: Mutex::new(policy),
            changed: watch::channel(0).0,
            max_pending,
        }
    }

    /// Sets who answers (an MCP client that takes forms asks a person).
    pub(crate) fn set_policy(&self, policy: AnswerPolicy) {
        *self.policy.lock().expect("requests poisoned") = policy;
    }

    /// The policy.
    pub(crate) fn policy(&self) -> AnswerPolicy {
        *self.policy.lock().expect("requests poisoned")
    }

    /// Opens `request`: it waits for an answer, unless the policy answers it now.
    pub(crate) fn open(&self, request: PersonRequest) -> Opened {
        match self.policy() {
            AnswerPolicy::Ask => {}
            AnswerPolicy::Deny => {
                return Opened::Answered(PersonAnswer {
                    verdict: Verdict::Deny,
                    text: "nobody is there to answer: this run denies every request at once (`warren run --approve deny`, the default with no terminal or web view; an MCP client that takes no forms; a worker's job from a producer other than warren); `warren run --approve ask` waits for a person".into(),
                    by: "policy".into(),
                })
            }
            AnswerPolicy::Approve => {
                return Opened::Answered(PersonAnswer {
                    verdict: match request.kind {
                        crate::events::RequestKind::Approval => Verdict::Approve,
                        crate::events::RequestKind::Question => Verdict::Answer,
                    },
                    text: String::new(),
                    by: "policy".into(),
                })
            }
        }
        let mut pending = self.pending.lock().expect("requests poisoned");
        if pending.len() >= self.max_pending {
            return Opened::Full(format!(
                "{} requests of this run already wait for a person (at most {}: [defaults] max_pending_requests); not asked",
                pending.len(),
                self.max_pending
            ));
        }
        let (answer, receiver) = oneshot::channel();
        pending.insert(request.id.clone(), Pending { request, answer });
        drop(pending);
        self.changed.send_modify(|n| *n += 1);
        Opened::Waiting(receiver)
    }

    /// Closes request `id` (answered, timed out or abandoned).
    pub(crate) fn close(&self, id: &str) {
        let removed = self.pending.lock().expect("requests poisoned").remove(id);
        if removed.is_some() {
            self.changed.send_modify(|n| *n += 1);
        }
    }

    /// Answers request `id`; `Err` says why not (no such request waits, or the
    /// answer does not fit its kind).
    pub(crate) fn answer(&self, id: &str, answer: PersonAnswer) -> Result<PersonRequest, String> {
        let mut pending = self.pending.lock().expect("requests poisoned");
        let Some(waiting) = pending.get(id) else {
            let ids: Vec<&String> = pending.keys().collect();
            return Err(match ids.is_empty() {
                true => format!("no request `{id}` waits: none does now"),
                false => format!(
                    "no request `{id}` waits (waiting: {})",
                    ids.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        let question = waiting.request.kind == crate::events::RequestKind::Question;
        if question != (answer.verdict == Verdict::Answer) {
            return Err(match question {
                true => format!("request `{id}` is a question: answer it with text"),
                false => format!("request `{id}` is an approval: approve, approve_tool or deny it"),
            });
        }
        let waiting = pending.remove(id).expect("present");
        drop(pending);
        if answer.verdict == Verdict::ApproveTool {
            self.approve_tool(&waiting.request.tool);
        }
        // The agent may have stopped waiting this instant: then it is simply closed.
        let _ = waiting.answer.send(answer);
        self.changed.send_modify(|n| *n += 1);
        Ok(waiting.request)
    }

    /// The requests waiting now, by id.
    pub(crate) fn pending(&self) -> Vec<PersonRequest> {
        let pending = self.pending.lock().expect("requests poisoned");
        pending.values().map(|p| p.request.clone()).collect()
    }

    /// Every later call of `tool` in the run needs no approval.
    pub(crate) fn approve_tool(&self, tool: &str) {
        self.approved
            .lock()
            .expect("requests poisoned")
            .insert(tool.to_string());
    }

    /// Whether a person approved `tool` for the rest of the run.
    pub(crate) fn tool_approved(&self, tool: &str) -> bool {
        self.approved
            .lock()
            .expect("requests poisoned")
            .contains(tool)
    }

    /// Ticks whenever a request opens or closes.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::RequestKind;

    fn request(id: &str, kind: RequestKind) -> PersonRequest {
        PersonRequest {
            id: id.into(),
            agent: "a".into(),
            path: "r/a".into(),
            kind,
            tool: "write_file".into(),
            call_id: "c".into(),
            arguments: "{}".into(),
            touches: Vec::new(),
            rule: Vec::new(),
            question: None,
            deadline_ms: 0,
        }
    }

    fn said(verdict: Verdict) -> PersonAnswer {
        PersonAnswer {
            verdict,
            text: "because".into(),
            by: "cli:me".into(),
        }
    }

    #[tokio::test]
    async fn an_answer_reaches_the_waiting_request_once() {
        let requests = Requests::new(2, AnswerPolicy::Deny);
        requests.set_policy(AnswerPolicy::Ask);
        let Opened::Waiting(wait) = requests.open(request("q1", RequestKind::Approval)) else {
            panic!("not waiting");
        };
        assert_eq!(requests.pending().len(), 1);
        let wrong = requests.answer("q1", said(Verdict::Answer)).unwrap_err();
        assert!(wrong.contains("is an approval"), "{wrong}");
        requests.answer("q1", said(Verdict::ApproveTool)).unwrap();
        assert_eq!(wait.await.unwrap().verdict, Verdict::ApproveTool);
        assert!(requests.tool_approved("write_file"));
        let again = requests.answer("q1", said(Verdict::Deny)).unwrap_err();
        assert!(again.contains("no request `q1` waits"), "{again}");
    }

    #[test]
    fn the_pending_bound_and_the_policies_hold() {
        let requests = Requests::new(1, AnswerPolicy::Deny);
        let Opened::Answered(denied) = requests.open(request("q1", RequestKind::Approval)) else {
            panic!("the default policy asks nobody");
        };
        assert_eq!(denied.verdict, Verdict::Deny);
        assert!(denied.text.contains("--approve"), "{}", denied.text);
        requests.set_policy(AnswerPolicy::Ask);
        assert!(matches!(
            requests.open(request("q1", RequestKind::Approval)),
            Opened::Waiting(_)
        ));
        let Opened::Full(why) = requests.open(request("q2", RequestKind::Question)) else {
            panic!("over the bound");
        };
        assert!(why.contains("max_pending_requests"), "{why}");
        requests.close("q1");
        assert!(requests.pending().is_empty());
    }
}
