//! Claude Code agent files as people write them: YAML of every shape, bad files
//! skipped without blocking the rest, Claude Code tool names mapped, `disallowedTools`
//! and `permissionMode: plan` enforced, `warren agents` and its `--check`.

use serde_json::{json, Value};
use warren::{AgentState, Config, Host};

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{text, tree_digest, warren, World};

/// The most bytes of a profile's description (docs/configuration.md: 4096 bytes).
const MAX_PROFILE_DESCRIPTION_BYTES: usize = 4 * 1024;

fn agent(world: &World, file: &str, content: &str) {
    let path = world.path(&format!("agents/{file}"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// `[defaults]` every agent file inherits: docs writable, so only the agent file's own
/// restrictions can stop a write.
const DEFAULTS: &str = r#"
[defaults.capabilities]
fs = [{ host = "docs", guest = "/docs", mode = "rw" }]
"#;

fn profile_json<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no profile {name} in {report:#}"))
}

#[test]
fn a_collection_loads_in_full_and_bad_files_are_skipped_with_their_line() {
    let world = World::new();
    world.config(DEFAULTS);
    agent(
        &world,
        "code.reviewer.md",
        "---\nname: code.reviewer\ndescription: |\n  Reviews code.\n  Proactively.\ntools: Read, Grep, Glob, Bash, mcp__github__get_issue\nmodel: sonnet\ncolor: red\n---\nYou review code.\n",
    );
    agent(
        &world,
        "team/helper.md",
        "---\nname: helper\ndescription: Use this agent when: the user asks. Examples:\n\n<example>\nContext: a user\nuser: \"help\"\n</example>\ntools: Read\n---\nHelp.\n",
    );
    agent(
        &world,
        "nameless.md",
        "---\ndescription: no name here\n---\nBody.\n",
    );
    agent(
        &world,
        "broken.md",
        "---\nname: broken\nmaxTurns: lots\n---\n",
    );
    agent(&world, "unclosed.md", "---\nname: unclosed\n");
    agent(
        &world,
        "zz-dup.md",
        "---\nname: helper\n---\nSecond helper.\n",
    );
    agent(&world, "README.md", "# My agents\n\nA collection.\n");

    let output = warren(&world, &["agents", "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = report["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    // The implicit `main` (the root's) first, then the files' profiles.
    assert_eq!(names, ["main", "code-reviewer", "helper", "nameless"]);

    let reviewer = profile_json(&report, "code-reviewer");
    assert_eq!(reviewer["written_name"], "code.reviewer");
    assert_eq!(reviewer["source"], "agents/code.reviewer.md");
    assert_eq!(reviewer["description"], "Reviews code.\nProactively.");
    assert_eq!(
        reviewer["selection"]["allow"],
        json!(["read_file", "grep", "glob"])
    );
    // The tools it really gets from the loaded plugins; no spawn tools (no `Task`).
    assert!(reviewer["tools"]
        .as_array()
        .unwrap()
        .contains(&json!("read_file")));
    assert!(!reviewer["tools"].to_string().contains("write_file"));
    assert!(!reviewer["tools"].to_string().contains("spawn_agent"));
    let notes = reviewer["notes"].to_string();
    assert!(
        notes.contains("not available: Bash, mcp__github__get_issue"),
        "{notes}"
    );
    assert!(notes.contains("model `sonnet`"), "{notes}");
    assert!(notes.contains("ignored: color"), "{notes}");

    let helper = profile_json(&report, "helper");
    assert!(helper["description"]
        .as_str()
        .unwrap()
        .contains("<example>\nContext: a user"));
    assert!(helper["notes"].to_string().contains("not valid YAML"));
    assert_eq!(profile_json(&report, "nameless")["written_name"], "");

    let skipped: Vec<String> = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{}:{}: {}",
                s["file"].as_str().unwrap(),
                s["line"],
                s["reason"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    assert!(
        skipped[0].starts_with("agents/broken.md:3: maxTurns: must be between 1 and 1000"),
        "{skipped:?}"
    );
    assert!(
        skipped[1].starts_with("agents/unclosed.md:1: the front matter"),
        "{skipped:?}"
    );
    assert!(
        skipped[2].starts_with("agents/zz-dup.md:1: profile `helper` is already defined by")
            && skipped[2].contains("agents/team/helper.md"),
        "{skipped:?}"
    );
    assert_eq!(report["not_agent_files"], json!(["agents/README.md"]));

    // The text view, and --check for CI.
    let output = warren(&world, &["agents"]);
    let stdout = text(&output.stdout);
    assert!(output.status.success());
    assert!(
        stdout.contains("code-reviewer (written `code.reviewer`)"),
        "{stdout}"
    );
    assert!(stdout.contains("skipped 3 agent file(s):"), "{stdout}");
    let check = warren(&world, &["agents", "--check"]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check.stderr));
    assert!(text(&check.stderr).contains("3 agent file(s) skipped"));
    // A run of any profile still works while files are skipped; the skips are warned.
    let tools = warren(&world, &["tools", "--profile", "helper"]);
    assert!(tools.status.success(), "{}", text(&tools.stderr));
    assert!(
        text(&tools.stderr).contains("skipping agent file"),
        "{}",
        text(&tools.stderr)
    );
    for bad in ["broken.md", "unclosed.md", "zz-dup.md"] {
        std::fs::remove_file(world.path(&format!("agents/{bad}"))).unwrap();
    }
    assert!(warren(&world, &["agents", "--check"]).status.success());
}

#[test]
fn disallowed_tools_and_plan_mode_are_enforced() {
    let world = World::new();
    world.config(DEFAULTS);
    agent(
        &world,
        "reader.md",
        "---\nname: reader\ndescription: Reads only\ndisallowedTools: Write, Edit, \"symlink\"\n---\nRead.\n",
    );
    agent(
        &world,
        "planner.md",
        "---\nname: planner\ntools: [Read, Write, symlink]\npermissionMode: plan\n---\nPlan.\n",
    );
    agent(&world, "writer.md", "---\nname: writer\n---\nWrite.\n");
    let before = tree_digest(&world.path("docs"));

    // `disallowedTools` subtracts from every tool: write_file and symlink are gone.
    let output = warren(&world, &["tools", "--profile", "reader"]);
    let output = text(&output.stdout);
    let (listed, left_out) = output.split_once("\nnot for profile `reader`: ").unwrap();
    assert!(
        listed.contains("read_file") && listed.contains("list_dir"),
        "{listed}"
    );
    assert!(
        !listed.contains("write_file") && !listed.contains("symlink"),
        "{listed}"
    );
    assert!(
        left_out.contains("symlink")
            && left_out.contains("write_file")
            && left_out
                .contains("(left out by its `tools`, `disallowedTools` and `permissionMode` in "),
        "{left_out}"
    );
    let write = warren(
        &world,
        &[
            "call",
            "write_file",
            r#"{"path":"/docs/x.md","content":"no"}"#,
            "--profile",
            "reader",
        ],
    );
    assert_eq!(write.status.code(), Some(1));
    assert!(
        text(&write.stderr).contains("no tool `write_file` is available to profile `reader`"),
        "{}",
        text(&write.stderr)
    );

    // Plan mode: write tools withheld even when listed, and every grant read-only, so a
    // tool that writes some other way is refused by the sandbox.
    let output = text(&warren(&world, &["tools", "--profile", "planner"]).stdout);
    let (listed, left_out) = output.split_once("\nnot for profile `planner`: ").unwrap();
    assert!(
        listed.contains("read_file") && !listed.contains("write_file"),
        "{listed}"
    );
    assert!(left_out.contains("write_file"), "{left_out}");
    let symlink = warren(
        &world,
        &[
            "call",
            "symlink",
            r#"{"dir":"/docs","link":"evil","target":"notes.md"}"#,
            "--profile",
            "planner",
        ],
    );
    assert_eq!(symlink.status.code(), Some(1), "{}", text(&symlink.stdout));
    assert!(
        text(&symlink.stderr).contains("not-permitted"),
        "{}",
        text(&symlink.stderr)
    );
    assert_eq!(
        tree_digest(&world.path("docs")),
        before,
        "nothing under docs changed"
    );

    // The same defaults without those restrictions can write: the tests above are not
    // passing for another reason.
    let write = warren(
        &world,
        &[
            "call",
            "write_file",
            r#"{"path":"/docs/x.md","content":"yes"}"#,
            "--profile",
            "writer",
        ],
    );
    assert!(write.status.success(), "{}", text(&write.stderr));
    assert_eq!(
        std::fs::read_to_string(world.path("docs/x.md")).unwrap(),
        "yes"
    );
}

#[test]
fn tool_aliases_and_model_aliases_come_from_warren_toml() {
    let world = World::new();
    world.config(&format!(
        "{DEFAULTS}\n[models.big]\nprovider = \"scripted\"\nscript = \"s.toml\"\n[models.small]\nprovider = \"scripted\"\nscript = \"s.toml\"\n\
         [defaults]\nmodel = \"small\"\n[model_aliases]\nopus = \"big\"\n[tool_aliases]\nBash = \"echo\"\nWebSearch = [\"http_get\"]\n\
         [profiles.main]\ntools = [\"Read\", \"LS\"]\ndisallowed_tools = [\"Task\"]\n"
    ));
    agent(
        &world,
        "a.md",
        "---\nname: a\ntools: Bash, WebSearch, Read\nmodel: opus\n---\nA.\n",
    );
    agent(
        &world,
        "b.md",
        "---\nname: b\nmodel: inherit\ntools: Read, Task\n---\nB.\n",
    );
    let output = warren(&world, &["agents", "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let a = profile_json(&report, "a");
    assert_eq!(a["tools"], json!(["echo", "http_get", "read_file"]));
    assert_eq!(a["model"], "big");
    assert_eq!(a["notes"], json!([]));
    let b = profile_json(&report, "b");
    assert_eq!(b["inherit_model"], true);
    assert_eq!(
        b["tools"],
        json!([
            "read_file",
            "spawn_agent",
            "await_agents",
            "cancel_agent",
            "message_agent",
            "list_agents"
        ])
    );
    // Claude Code names work in warren.toml too, and `disallowed_tools` there withholds
    // the spawn tools.
    let main = profile_json(&report, "main");
    assert_eq!(main["tools"], json!(["list_dir", "read_file"]));

    let bad = warren(&world, &["agents"]);
    assert!(bad.status.success());
    std::fs::write(
        world.path("warren.toml"),
        std::fs::read_to_string(world.path("warren.toml"))
            .unwrap()
            .replace("opus = \"big\"", "opus = \"huge\""),
    )
    .unwrap();
    let bad = warren(&world, &["agents"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("model_aliases.opus: no model `huge`"),
        "{}",
        text(&bad.stderr)
    );
}

/// A root agent made from an agent file with `disallowedTools: Write`: the model is
/// never offered `write_file` or the spawn tools, and when it calls `write_file`
/// anyway the call fails and nothing is written.
#[tokio::test]
async fn a_read_only_agent_cannot_write_in_a_run() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.push(Reply::json(json!({
        "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\":\"/docs/pwned.md\",\"content\":\"x\"}"}}
        ]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}
    })));
    server.push(Reply::json(json!({
        "choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": "could not write"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}
    })));
    let config = world.config(&format!(
        "{DEFAULTS}\n[defaults]\nmax_depth = 2\n[models.fake]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n",
        server.base_url
    ));
    agent(
        &world,
        "auditor.md",
        "---\nname: auditor\ndescription: Audits\ntools:\n  - Read\n  - Write\n  - LS\ndisallowedTools: [Write]\n---\nYou audit.\n",
    );
    let host = Host::load(Config::load(&config).unwrap()).await.unwrap();
    let report = host.start("auditor", "AUDIT", None).unwrap().wait().await;
    assert_eq!(report.root.state, AgentState::Ok, "{:?}", report.root);
    let requests = server.requests();
    let offered: Vec<String> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(offered, ["list_dir", "read_file"]);
    assert_eq!(requests[0].body["messages"][0]["content"], "You audit.");
    let result = requests[1].body["messages"][3]["content"].as_str().unwrap();
    assert!(
        result.contains("no tool `write_file` is available to profile `auditor`"),
        "{result}"
    );
    assert!(!world.path("docs/pwned.md").exists());
}

/// The documented mapping (docs/agent-files.md), written out again here as data so
/// the corpus test checks the loader against the table, not against itself.
const MAPPING: &[(&str, &[&str])] = &[
    ("Read", &["read_file"]),
    ("Write", &["write_file"]),
    ("Edit", &["edit_file"]),
    ("MultiEdit", &["edit_file"]),
    ("Grep", &["grep"]),
    ("Glob", &["glob"]),
    ("LS", &["list_dir"]),
    ("WebFetch", &["fetch"]),
    ("Task", &[]),
    ("Agent", &[]),
];

/// Every public agent file in `tests/corpus/agent-files` (see its SOURCES.md), one
/// repository's collection at a time as a user would drop it into `agents/`: each file
/// becomes a profile, or is skipped for the reason `EXPECTED.md` lists for it; and for
/// every file with a one-line `tools:` list, the profile gets exactly the tools the
/// mapping gives and reports the rest as unavailable.
#[test]
fn public_agent_collections_load() {
    let corpus = crate::support::root().join("tests/corpus/agent-files");
    let expected = std::fs::read_to_string(corpus.join("EXPECTED.md")).unwrap();
    let expected_skips: Vec<(String, String)> = expected
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| {
            let (file, rest) = l.split_once("` | `").unwrap();
            let (reason, _why) = rest.split_once("` |").unwrap();
            (file.to_string(), reason.to_string())
        })
        .collect();
    let mut seen_skips = Vec::new();
    let (mut files, mut profiles, mut mapped) = (0, 0, 0);
    let mut repos: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    repos.sort();
    for repo in repos {
        let repo_name = repo.file_name().unwrap().to_string_lossy().into_owned();
        let world = World::new();
        world.config(DEFAULTS);
        let agents = world.path("agents");
        std::fs::create_dir(&agents).unwrap();
        for entry in std::fs::read_dir(&repo).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, agents.join(path.file_name().unwrap())).unwrap();
            files += 1;
        }
        let output = warren(&world, &["agents", "--json"]);
        assert!(
            output.status.success(),
            "{repo_name}: {}",
            text(&output.stderr)
        );
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["not_agent_files"], json!([]), "{repo_name}");
        for skipped in report["skipped"].as_array().unwrap() {
            let file = format!(
                "{repo_name}/{}",
                skipped["file"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("agents/")
            );
            let reason = skipped["reason"].as_str().unwrap();
            let listed = expected_skips.iter().find(|(f, _)| *f == file);
            assert!(
                listed.is_some_and(|(_, why)| reason.contains(why.as_str())),
                "{file} skipped unexpectedly: {reason}"
            );
            seen_skips.push(file);
        }
        // The agent files' profiles (the implicit `main` comes from warren.toml).
        let from_files = report["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["source"] != "warren.toml");
        for profile in from_files {
            profiles += 1;
            let source = world.path(profile["source"].as_str().unwrap());
            let content = std::fs::read_to_string(&source).unwrap();
            let front = content.split("\n---").next().unwrap();
            let Some(line) = front.lines().find(|l| l.starts_with("tools:")) else {
                continue;
            };
            let value = line["tools:".len()..].trim();
            if value.is_empty() || value.starts_with(['|', '>']) {
                continue;
            }
            let written: Vec<String> = value
                .trim_matches(['[', ']'])
                .split(',')
                .map(|t| t.trim().trim_matches(['"', '\'']).to_string())
                .filter(|t| !t.is_empty())
                .collect();
            let (mut tools, mut unavailable) = (Vec::<String>::new(), Vec::<String>::new());
            for name in &written {
                match MAPPING.iter().find(|(claude, _)| claude == name) {
                    Some((_, warren_tools)) => {
                        tools.extend(warren_tools.iter().map(|t| t.to_string()))
                    }
                    None if !name.starts_with("mcp__")
                        && name.chars().all(|c| c.is_ascii_lowercase() || c == '_') =>
                    {
                        tools.push(name.clone())
                    }
                    None => unavailable.push(name.clone()),
                }
            }
            tools.dedup();
            let mut unique = Vec::new();
            for tool in tools {
                if !unique.contains(&tool) {
                    unique.push(tool);
                }
            }
            assert_eq!(
                profile["selection"]["allow"],
                json!(unique),
                "{}",
                source.display()
            );
            let notes = profile["notes"].to_string();
            if unavailable.is_empty() {
                assert!(
                    !notes.contains("not available"),
                    "{}: {notes}",
                    source.display()
                );
            } else {
                let expected = format!("not available: {}", unavailable.join(", "));
                assert!(
                    notes.contains(&expected),
                    "{}: {notes} lacks {expected}",
                    source.display()
                );
            }
            mapped += 1;
        }
    }
    let unused: Vec<_> = expected_skips
        .iter()
        .filter(|(f, _)| !seen_skips.contains(f))
        .collect();
    assert!(
        unused.is_empty(),
        "EXPECTED.md lists files that loaded: {unused:?}"
    );
    assert!(files >= 150, "{files} files");
    assert_eq!(profiles + seen_skips.len(), files);
    assert!(mapped >= 80, "only {mapped} tool lists checked");
}

/// A published agent file whose description is 5,732 bytes (three `<example>` blocks),
/// which Claude Code loads: warren loads it too, lists it to spawning agents cut to
/// `MAX_PROFILE_DESCRIPTION_BYTES` with a mark, and `warren agents` says so.
#[test]
fn a_published_file_with_a_long_description_loads_and_is_cut_where_prompts_list_it() {
    let world = World::new();
    world.config(DEFAULTS);
    let stored = crate::support::root().join(
        "tests/corpus/agent-files/davila7__claude-code-templates/cli-tool__components__agents__expert-advisors__agent-organizer.md",
    );
    std::fs::create_dir(world.path("agents")).unwrap();
    std::fs::copy(&stored, world.path("agents/agent-organizer.md")).unwrap();
    let output = warren(&world, &["agents", "--json", "--check"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let profile = profile_json(&report, "agent-organizer");
    let description = profile["description"].as_str().unwrap();
    assert!(
        description.len() <= MAX_PROFILE_DESCRIPTION_BYTES
            && description.starts_with("Use when assembling and optimizing multi-agent teams")
            && description.ends_with(" […cut]"),
        "{} bytes: {description}",
        description.len()
    );
    assert!(
        profile["notes"]
            .to_string()
            .contains("description is 5732 bytes; cut to 4096 where other agents' prompts list it"),
        "{}",
        profile["notes"]
    );
    let listed = text(&warren(&world, &["agents"]).stdout);
    assert!(
        listed.contains("description is 5732 bytes; cut to 4096"),
        "{listed}"
    );
}

/// A tool an agent file names that has no sandboxed equivalent is warned about when an
/// agent of that profile first runs — once per profile, however many agents run.
#[test]
fn unavailable_tools_are_warned_once_per_profile_when_it_runs() {
    let world = World::new();
    std::fs::write(
        world.path("script.toml"),
        r#"
[[turns]]
profile = "main"
tool_calls = [
  { name = "spawn_agent", arguments = { profile = "helper", task = "first" } },
  { name = "spawn_agent", arguments = { profile = "helper", task = "second" } },
]
[[turns]]
profile = "helper"
text = "done"
[[turns]]
profile = "helper"
text = "done"
[[turns]]
profile = "main"
when = "Started job"
tool_calls = [{ name = "await_agents", arguments = { job_ids = "*" } }]
[[turns]]
profile = "main"
when = "OK]"
text = "both done"
[[turns]]
profile = "main"
when = "still running"
text = "both done"
"#,
    )
    .unwrap();
    // The last turn: when one helper's end is pushed to the root before its second
    // turn, the root answers, is told the other still runs, and gets its result.
    world.config(&format!(
        "{DEFAULTS}\n[models.script]\nprovider = \"scripted\"\nscript = \"script.toml\"\n[profiles.main]\ntools = []\n"
    ));
    agent(
        &world,
        "helper.md",
        "---\nname: helper\ntools: Read, Bash, WebSearch\n---\nHelp.\n",
    );
    let output = warren(&world, &["run", "--progress", "none", "go"]);
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(text(&output.stdout).trim(), "both done");
    let warning = "tools with no sandboxed equivalent, not available: Bash, WebSearch";
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");
    assert!(stderr.contains("profile=helper"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes in a piped log: {stderr}"
    );
}

/// `model: inherit`: a sub-agent of that profile uses its parent's model.
#[tokio::test]
async fn an_inheriting_agent_uses_its_parents_model() {
    let world = World::new();
    let server = FakeLlm::start().await;
    server.route(
        "ROOT",
        Reply::json(json!({
            "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "spawn_agent", "arguments": "{\"profile\":\"heir\",\"task\":\"CHILD\",\"background\":false}"}}
            ]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}
        })),
    );
    let done = |text: &str| {
        Reply::json(json!({
            "choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}
        }))
    };
    server.route("CHILD", done("child done"));
    server.route("child done", done("root done"));
    let model = |name: &str, id: &str| {
        format!(
            "[models.{name}]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"{id}\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n",
            server.base_url
        )
    };
    let config = world.config(&format!(
        "{}{}[defaults]\nmodel = \"other\"\n[profiles.main]\nmodel = \"lead\"\ntools = []\n",
        model("lead", "lead-model"),
        model("other", "other-model")
    ));
    agent(
        &world,
        "heir.md",
        "---\nname: heir\nmodel: inherit\ntools: []\n---\nInherit.\n",
    );
    let host = Host::load(Config::load(&config).unwrap()).await.unwrap();
    let report = host.start("main", "ROOT", None).unwrap().wait().await;
    assert_eq!(report.root.state, AgentState::Ok, "{:?}", report.root);
    let child = server
        .requests()
        .into_iter()
        .find(|r| {
            r.body.to_string().contains("CHILD") && r.body["messages"][0]["content"] == "Inherit."
        })
        .unwrap();
    assert_eq!(child.body["model"], "lead-model");
}
