//! What the run journal itself costs per sub-agent, in host CPU: the records of the
//! peer workload (`bench/peer-swarm`: a root spawns 1,000 researchers in ten rounds of
//! 100, each reads one file in two model turns, the root awaits each round) are built
//! and journaled as a run makes them, over the 2.4 s such a run takes, and the CPU
//! time of every thread of this process (the journal's writer thread included) is
//! compared with the same run's when the records are not made (the journal off). The end-to-end
//! figure (`bench/peer-swarm/run.sh --journal-cost N`) varies by several per cent from
//! one run to the next, more than the journal costs; this one is the journal alone.
//!
//! Run with: `cargo bench --bench journal [-- RUNS]`

use warren::AgentIntro;
use warren::AgentState;
use warren::{CallFigures, ToolOutcome};
use warren::{Journal, Record, RecordedCall};

const ROUNDS: usize = 10;
const FAN: usize = 100;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or(Ok(5), |a| a.parse())?;
    let dir = tempfile::tempdir()?;
    let mut costs = Vec::new();
    let mut bytes = 0;
    for run in 0..runs {
        // The same run with the journal off, then on: the difference is the journal's.
        let cpu = cpu_ns();
        peer_run(None).await;
        let off = cpu_ns() - cpu;
        let journal = Journal::create(dir.path(), &format!("run{run}"), u64::MAX)?;
        let cpu = cpu_ns();
        peer_run(Some(&journal)).await;
        journal.flush().await;
        let on = cpu_ns() - cpu;
        drop(journal);
        bytes = std::fs::metadata(dir.path().join(format!("run{run}/journal.jsonl")))?.len();
        let agents = (ROUNDS * FAN) as f64;
        costs.push((on as f64 - off as f64) / agents / 1000.0);
        println!(
            "run {run}: {:.1} µs of CPU per sub-agent with the journal, {:.1} µs without",
            on as f64 / agents / 1000.0,
            off as f64 / agents / 1000.0
        );
    }
    costs.sort_by(f64::total_cmp);
    println!(
        "journal: {:.1} µs of host CPU per sub-agent (median of {runs}), {:.1} KB of journal each",
        costs[costs.len() / 2],
        bytes as f64 / (ROUNDS * FAN) as f64 / 1000.0
    );
    Ok(())
}

/// CPU time of every thread of this process so far, in nanoseconds (from each
/// thread's `schedstat`).
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
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
    let digest = warren::prompt_digest(warren::SUBAGENT_PROMPT);
    if first {
        rec(journal, || Record::SystemPrompt {
            digest: digest.clone(),
            text: warren::SUBAGENT_PROMPT.into(),
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
