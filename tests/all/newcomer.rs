//! A newcomer's first minutes: `warren init` in an empty directory, the built-in tools
//! with no plugin files, `warren run` offline at once, and `warren doctor` explaining a
//! broken model or config.

use std::process::{Command, Output};

use serde_json::json;

use crate::fake_llm::{FakeLlm, Reply};

fn warren(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(args)
        .current_dir(dir)
        .env_remove("WARREN_CONFIG")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env("RUST_LOG", "warn")
        .env("XDG_CACHE_HOME", crate::support::cache_dir())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Init, then tools, run and doctor work in the new project with nothing else: the
/// tools are the binary's built-in plugins, the model an offline script.
#[test]
fn init_gives_a_project_that_runs_offline_with_built_in_tools() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("new-project");
    let output = warren(dir.path(), &["init", "new-project"]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(stdout.contains("model: Scripted"), "{stdout}");
    for file in [
        "warren.toml",
        "AGENTS.md",
        "agents/reviewer.md",
        "script.toml",
    ] {
        assert!(project.join(file).is_file(), "{file}: {stdout}");
    }
    assert!(
        stdout.contains("cd new-project && warren doctor"),
        "{stdout}"
    );
    assert!(
        stdout.contains("warren run \"What is in this project?\""),
        "{stdout}"
    );

    let tools = warren(&project, &["tools", "--json", "--profile", "researcher"]);
    assert!(tools.status.success(), "{}", text(&tools.stderr));
    let tools: serde_json::Value = serde_json::from_slice(&tools.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["glob", "grep", "list_dir", "read_file"]);
    assert!(tools
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["builtin"] == true));

    let run = warren(
        &project,
        &["run", "--progress", "none", "What is in this project?"],
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(
        text(&run.stdout).contains("This is a new warren project"),
        "{}",
        text(&run.stdout)
    );

    let doctor = warren(&project, &["doctor"]);
    let report = text(&doctor.stdout);
    assert!(doctor.status.success(), "{report}");
    assert!(
        report.contains("ok    plugins: 4 built-in, 0 from files"),
        "{report}"
    );
    assert!(report.contains("ok    model default (scripted"), "{report}");

    // A second init keeps every file as the user left it.
    std::fs::write(project.join("AGENTS.md"), "mine").unwrap();
    let again = warren(dir.path(), &["init", "new-project"]);
    assert!(
        text(&again.stdout).contains("kept  new-project/AGENTS.md"),
        "{}",
        text(&again.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(project.join("AGENTS.md")).unwrap(),
        "mine"
    );

    // Built-ins can be left out.
    let config = std::fs::read_to_string(project.join("warren.toml")).unwrap();
    std::fs::write(
        project.join("warren.toml"),
        format!("[plugins]\nbuiltins = [\"http\"]\n\n{config}"),
    )
    .unwrap();
    let tools = warren(&project, &["tools", "--profile", "main"]);
    assert!(
        text(&tools.stdout).contains("has no tools"),
        "{}",
        text(&tools.stdout)
    );
    std::fs::write(
        project.join("warren.toml"),
        format!("[plugins]\nbuiltins = [\"nope\"]\n\n{config}"),
    )
    .unwrap();
    let bad = warren(&project, &["tools"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr)
            .contains("no built-in plugin `nope` (built-in: files, http, run-python, run-js)"),
        "{}",
        text(&bad.stderr)
    );
}

/// Outside a project every command that needs a config says that there is none and
/// how to make one or name another, rather than only "cannot read".
#[test]
fn outside_a_project_the_error_points_at_init_and_config() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["run", "hello"][..], &["tools"], &["call", "read_file"]] {
        let output = warren(dir.path(), args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cannot read warren.toml: no such file; `warren init` creates a project in this directory, `--config PATH` uses another config file"),
            "{args:?}: {stderr}"
        );
    }
    let doctor = warren(dir.path(), &["doctor"]);
    let report = text(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(1), "{report}");
    assert!(
        report.contains("FAIL  config: cannot read warren.toml: no such file; `warren init`")
            && report.contains("→ doctor checks the config that --config names"),
        "{report}"
    );
}

/// Doctor names what is wrong and what to do: a rejected key, a model the server does
/// not know, a working model, and a config error at its line.
#[tokio::test]
async fn doctor_explains_a_broken_key_and_model() {
    let server = FakeLlm::start().await;
    // Doctor checks models in name order: gone, good, locked.
    server.push(Reply::status(
        404,
        r#"{"error":{"message":"The model `gone` does not exist"}}"#,
    ));
    server.push(Reply::json(json!({
        "choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": "OK"}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 1}
    })));
    server.push(Reply::status(
        401,
        r#"{"error":{"message":"Incorrect API key provided"}}"#,
    ));
    let dir = tempfile::tempdir().unwrap();
    let model = |name: &str| {
        format!(
            "[models.{name}]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"{name}\"\napi_key_env = \"CARGO_PKG_NAME\"\nstream = false\nmax_retries = 0\n",
            server.base_url
        )
    };
    std::fs::write(
        dir.path().join("warren.toml"),
        format!(
            "{}{}{}[defaults]\nmodel = \"good\"\n",
            model("good"),
            model("locked"),
            model("gone")
        ),
    )
    .unwrap();
    let output = tokio::task::spawn_blocking({
        let dir = dir.path().to_path_buf();
        move || warren(&dir, &["doctor"])
    })
    .await
    .unwrap();
    let report = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(report.contains("ok    model good"), "{report}");
    assert!(
        report.contains("FAIL  model locked") && report.contains("rejected the API key (HTTP 401)"),
        "{report}"
    );
    assert!(
        report.contains("→ check the key in the variable named by api_key_env"),
        "{report}"
    );
    assert!(
        report.contains("FAIL  model gone") && report.contains("→ fix `model`"),
        "{report}"
    );
    assert!(report.contains("2 failed"), "{report}");

    // A queue nobody serves.
    std::fs::write(dir.path().join("script.toml"), "").unwrap();
    std::fs::write(
        dir.path().join("warren.toml"),
        "[models.s]\nprovider = \"scripted\"\nscript = \"script.toml\"\n[queue]\nredis = \"redis://:secret@127.0.0.1:9\"\n",
    )
    .unwrap();
    let output = warren(dir.path(), &["doctor"]);
    let report = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(
        report.contains("FAIL  queue: ") && report.contains("→ start redis-server there"),
        "{report}"
    );
    assert!(
        !report.contains("secret"),
        "the password is never shown: {report}"
    );

    std::fs::write(
        dir.path().join("warren.toml"),
        "[defaults]\nmax_turns = 0\n",
    )
    .unwrap();
    let output = warren(dir.path(), &["doctor"]);
    let report = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        report.contains("FAIL  config: ")
            && report.contains("warren.toml")
            && report.contains("line 2"),
        "{report}"
    );
}
