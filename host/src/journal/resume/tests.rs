//! Reading a journal back for a resume: ids, responses, calls in doubt, spending.

use super::*;

fn line(record: Record) -> Line {
    Line {
        ts_ms: 1000,
        record,
    }
}

fn queued(id: &str, parent: Option<&str>, task: &str) -> Line {
    line(Record::AgentQueued(AgentIntro {
        agent: id.into(),
        parent: parent.map(Into::into),
        profile: "p".into(),
        task: task.into(),
        label: None,
        mode: None,
    }))
}

fn started() -> Line {
    line(Record::RunStarted {
        v: crate::journal::record::VERSION,
        run: "r".into(),
        task: "t".into(),
        profile: "main".into(),
        warren: "0".into(),
        config: "warren.toml".into(),
        config_sha256: "00".into(),
        plugins_sha256: Default::default(),
        limits: None,
        forked_from: None,
    })
}

fn spec(agent: &str, system: &str, system_digest: Option<&str>) -> Line {
    line(Record::AgentSpec {
        agent: agent.into(),
        message: "m".into(),
        model: None,
        tools: Vec::new(),
        max_turns: 1,
        timeout_s: 1,
        max_cost_usd: None,
        depth: 0,
        system: system.into(),
        system_digest: system_digest.map(Into::into),
    })
}

#[test]
fn a_system_prompt_is_read_whole_from_version_1_and_by_digest_from_version_2() {
    let prompt = "Be brief.";
    let digest = crate::journal::record::prompt_digest(prompt);
    let resume = Resume::new(vec![
        started(),
        queued("a", None, "t"),
        queued("b", Some("a"), "one"),
        queued("c", Some("a"), "two"),
        // Version 1: whole in the spec.
        spec("a", "Old and whole.", None),
        line(Record::SystemPrompt {
            digest: digest.clone(),
            text: prompt.into(),
        }),
        spec("b", "", Some(&digest)),
        spec("c", "", Some(&digest)),
    ])
    .unwrap();
    assert_eq!(resume.agent("a").unwrap().system, "Old and whole.");
    assert_eq!(resume.agent("b").unwrap().system, prompt);
    assert_eq!(resume.agent("c").unwrap().system, prompt);
    // A resumed process does not write a recorded prompt again.
    assert!(resume.has(&Record::SystemPrompt {
        digest,
        text: prompt.into()
    }));
}

#[test]
fn a_spawn_claims_the_recorded_child_of_its_parent_and_task_once() {
    let resume = Resume::new(vec![
        started(),
        queued("a", None, "t"),
        queued("b", Some("a"), "one"),
        queued("c", Some("a"), "two"),
        queued("d", Some("a"), "one"),
    ])
    .unwrap();
    assert_eq!(resume.root, "a");
    assert_eq!(resume.claim(None, "p", "t").as_deref(), Some("a"));
    // Claimed by task, not by order: a concurrent spawn may come first.
    assert_eq!(resume.claim(Some("a"), "p", "two").as_deref(), Some("c"));
    assert_eq!(resume.claim(Some("a"), "p", "one").as_deref(), Some("b"));
    assert_eq!(resume.claim(Some("a"), "p", "one").as_deref(), Some("d"));
    assert_eq!(resume.claim(Some("a"), "p", "one"), None);
    assert_eq!(resume.claim(Some("a"), "q", "two"), None);
    assert!(resume.is_recorded("d") && !resume.is_recorded("e"));
}

#[test]
fn tool_records_belong_to_the_turn_of_the_response_before_them() {
    let response = |agent: &str, turn: u32, cost_usd: f64| {
        line(Record::ModelResponse {
            agent: agent.into(),
            turn,
            request_messages: 1,
            notified: Vec::new(),
            receipts: Vec::new(),
            drained: None,
            request_digest: None,
            text: String::new(),
            reasoning: String::new(),
            refusal: None,
            provider_blocks: Vec::new(),
            tool_calls: Vec::new(),
            finish: "tool_calls".into(),
            input_tokens: 1,
            cached_input_tokens: 0,
            output_tokens: 1,
            cost_usd,
        })
    };
    let tool = |finished: bool| {
        if finished {
            line(Record::ToolFinished {
                agent: "a".into(),
                call_id: "call_1".into(),
                outcome: ToolOutcome::Ok,
                content: "done".into(),
                duration_ms: 1,
                figures: crate::sandbox::CallFigures {
                    fuel_used: Some(1),
                    output_bytes: 4,
                    memory_peak_bytes: Some(65536),
                },
            })
        } else {
            line(Record::ToolStarted {
                agent: "a".into(),
                call_id: "call_1".into(),
                tool: "append".into(),
                arguments: "{}".into(),
            })
        }
    };
    let resume = Resume::new(vec![
        started(),
        queued("a", None, "t"),
        response("a", 1, 0.5),
        tool(false),
        tool(true),
        response("a", 2, 0.25),
        // The same call id in the next turn, started and never finished.
        tool(false),
    ])
    .unwrap();
    let agent = resume.agent("a").unwrap();
    assert_eq!(
        agent.tool(1, "call_1").unwrap().finished,
        Some((ToolOutcome::Ok, "done".into()))
    );
    assert_eq!(agent.tool(2, "call_1").unwrap().finished, None);
    assert!(agent.tool(3, "call_1").is_none());
    assert!(agent.response(2).is_some() && agent.response(3).is_none());
    assert!(agent.response(0).is_none());
    assert_eq!(resume.spent_usd, 0.75);
}
