//! Entry points for the benches (`host/benches/`) that time what no public call can
//! isolate, where they need the whole crate: each is public only so a bench crate can
//! reach it, hidden from the documented API, and says which bench it serves. The
//! others (the sandbox's phase totals, a provider's request encoder) live beside the
//! code they time.

use std::path::Path;

use crate::agent::turns::SUBAGENT_PROMPT;
use crate::events::AgentIntro;
use crate::journal::record::prompt_digest;
use crate::journal::{Journal, Record, RecordedCall};
use crate::outcome::AgentState;
use crate::sandbox::{CallFigures, ToolOutcome};

/// Rounds of spawns in the peer workload.
const ROUNDS: usize = 10;
/// Sub-agents spawned per round.
const FAN: usize = 100;

/// Makes the records of one run of the peer workload (`bench/peer-swarm`: a root
/// spawns 1,000 researchers in ten rounds, each reads one file in two model turns, the
/// root awaits each round) as its agents make them, over the 2.4 s such a run takes,
/// and journals them as run `run_id` under `dir`, flushed to disk before it returns;
/// with no `dir` the records are never made (the journal off). Returns how many
/// sub-agents the run had. For
/// `cargo bench --bench journal`, which compares the process's CPU time of the two:
/// the journal's own cost, which a whole run's figure (tens of times larger, and
/// varying more than that from run to run) cannot show.
pub async fn journal_peer_workload(dir: Option<&Path>, run_id: &str) -> std::io::Result<usize> {
    let journal = dir
        .map(|dir| Journal::create(dir, run_id, u64::MAX))
        .transpose()?;
    peer_run(journal.as_ref()).await;
    if let Some(journal) = &journal {
        journal.flush().await;
    }
    Ok(ROUNDS * FAN)
}

/// The records of one peer run, made as its agents make them: each built from the
/// agent's own values (cloned, as a record is) and journaled.
async fn peer_run(journal: Option<&Journal>) {
    let root = "root00".to_string();
    let mut turn = 0;
    let mut first = true;
    for round in 0..ROUNDS {
        turn += 1;
        let calls: Vec<RecordedCall> = (0..FAN)
            .map(|i| RecordedCall {
                id: format!("call_{:08x}", round * FAN + i),
                name: "spawn_agent".into(),
                arguments: format!(
                    "{{\"profile\": \"researcher\", \"task\": \"Task {}: find the code word in /docs/topic{}.txt and report it.\"}}",
                    round * FAN + i,
                    i % 3 + 1
                ),
            })
            .collect();
        rec(journal, || response(&root, turn, calls.clone(), ""));
        let mut finished = String::new();
        for (i, call) in calls.iter().enumerate() {
            let child = format!("{:06x}", round * FAN + i + 1);
            rec(journal, || Record::ToolStarted {
                agent: root.clone(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
            });
            let task = format!(
                "Task {}: find the code word in /docs/topic{}.txt and report it.",
                round * FAN + i,
                i % 3 + 1
            );
            rec(journal, || {
                Record::AgentQueued(AgentIntro {
                    agent: child.clone(),
                    parent: Some(root.clone()),
                    profile: "researcher".into(),
                    task: task.clone(),
                    label: None,
                    mode: None,
                })
            });
            let started = format!("Started job {child} (researcher) in the background; you will be notified when it finishes.");
            rec(journal, || finished_call(&root, &call.id, &started, None));
            let answer = format!("FOUND[{}]: code word w{}", round * FAN + i, i % 3 + 1);
            researcher(journal, &child, &task, &answer, first);
            first = false;
            if i % 10 == 9 {
                // A run's records come over about 2.4 s, not at once: the writer
                // writes them in batches as it would.
                tokio::time::sleep(std::time::Duration::from_millis(24)).await;
            }
            finished.push_str(&format!(
                "[{child}: OK] researcher · 2 turns · 240 tokens · $0.0000 · 0.1 s\n{answer}\n\n"
            ));
        }
        turn += 1;
        let wait = RecordedCall {
            id: format!("call_wait_{round}"),
            name: "await_agents".into(),
            arguments: "{\"job_ids\": \"*\"}".into(),
        };
        rec(journal, || response(&root, turn, vec![wait.clone()], ""));
        rec(journal, || Record::ToolStarted {
            agent: root.clone(),
            call_id: wait.id.clone(),
            tool: wait.name.clone(),
            arguments: wait.arguments.clone(),
        });
        rec(journal, || finished_call(&root, &wait.id, &finished, None));
    }
}

/// One researcher: started, its spec, a read and an answer.
fn researcher(journal: Option<&Journal>, id: &str, task: &str, answer: &str, first: bool) {
    rec(journal, || Record::AgentStarted { agent: id.into() });
    let digest = prompt_digest(SUBAGENT_PROMPT);
    if first {
        rec(journal, || Record::SystemPrompt {
            digest: digest.clone(),
            text: SUBAGENT_PROMPT.into(),
        });
    }
    rec(journal, || Record::AgentSpec {
        agent: id.into(),
        message: task.into(),
        model: Some("default".into()),
        tools: vec!["read_file".into()],
        max_turns: 10,
        timeout_s: 60,
        max_cost_usd: None,
        depth: 1,
        system: String::new(),
        system_digest: Some(digest),
    });
    let read = RecordedCall {
        id: format!("call_read_{id}"),
        name: "read_file".into(),
        arguments: "{\"path\": \"/docs/topic1.txt\"}".into(),
    };
    rec(journal, || response(id, 1, vec![read.clone()], ""));
    rec(journal, || Record::ToolStarted {
        agent: id.into(),
        call_id: read.id.clone(),
        tool: read.name.clone(),
        arguments: read.arguments.clone(),
    });
    rec(journal, || {
        finished_call(id, &read.id, "code word w1\n", Some(9168))
    });
    rec(journal, || response(id, 2, Vec::new(), answer));
    rec(journal, || Record::AgentFinished {
        agent: id.into(),
        state: AgentState::Ok,
        text: answer.into(),
        output: None,
        error: None,
        turns: 2,
        input_tokens: 200,
        output_tokens: 40,
        cost_usd: 0.0,
        duration_ms: 47,
    });
}

/// Journals `record` when there is a journal; else it is never built, as in a run
/// with the journal off.
fn rec(journal: Option<&Journal>, record: impl FnOnce() -> Record) {
    if let Some(journal) = journal {
        journal.record(record());
    }
}

fn response(agent: &str, turn: u32, tool_calls: Vec<RecordedCall>, text: &str) -> Record {
    Record::ModelResponse {
        agent: agent.into(),
        turn,
        request_messages: turn as usize * 2 - 1,
        notified: Vec::new(),
        receipts: Vec::new(),
        drained: None,
        request_digest: Some(format!("{:032x}", u128::from(turn) * 0x9e37_79b9)),
        text: text.into(),
        reasoning: String::new(),
        refusal: None,
        provider_blocks: Vec::new(),
        finish: if tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
        .into(),
        tool_calls,
        input_tokens: 100,
        cached_input_tokens: 0,
        output_tokens: 20,
        cost_usd: 0.0,
    }
}

fn finished_call(agent: &str, call_id: &str, content: &str, fuel_used: Option<u64>) -> Record {
    Record::ToolFinished {
        agent: agent.into(),
        call_id: call_id.into(),
        outcome: ToolOutcome::Ok,
        content: content.into(),
        duration_ms: 0,
        figures: CallFigures {
            memory_peak_bytes: Some(1 << 20),
            ..CallFigures::of(content, fuel_used)
        },
    }
}
