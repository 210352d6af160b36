//! The `warren` binary: `tools`, `call`, exit codes, configuration errors and `--help`.

use std::process::Command;

use crate::support::{text, warren, World};

const PROFILES: &str = r#"
[profiles.main]
tools = ["read_file", "list_dir", "write_file", "search_text", "http_get"]
[profiles.main.capabilities]
fs = [{ host = "docs", guest = "/docs" }]

[profiles.crawler]
tools = ["http_get"]
"#;

#[test]
fn tools_lists_a_profiles_tools_with_schemas() {
    let world = World::new();
    world.config(PROFILES);
    let output = warren(&world, &["tools", "--profile", "crawler", "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let tools: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(tools.as_array().unwrap().len(), 1);
    assert_eq!(tools[0]["name"], "http_get");
    assert_eq!(tools[0]["plugin"], "http");
    assert_eq!(tools[0]["input_schema"]["required"][0], "url");

    let output = warren(&world, &["tools"]);
    let output = text(&output.stdout);
    let (listing, left_out) = output.split_once("\nnot for profile `main`: ").unwrap();
    for tool in [
        "read_file",
        "list_dir",
        "write_file",
        "search_text",
        "http_get",
    ] {
        assert!(listing.contains(&format!("{tool}  [")), "{listing}");
    }
    assert!(
        !listing.contains("spin") && left_out.contains("spin"),
        "hostile tools are outside the profile: {output}"
    );
}

/// A loaded tool missing from the listing is most often a selection the user forgot:
/// `warren tools` names the ones the profile does not get, and where that is decided.
#[test]
fn tools_names_the_loaded_tools_the_profile_leaves_out() {
    let world = World::new();
    std::fs::write(
        world.path("warren.toml"),
        format!(
            "[plugins]\ncache_dir = {:?}\n[profiles.reader]\ntools = [\"read_file\", \"list_*\"]\ndisallowed_tools = [\"list_dir\"]\n[profiles.everything]\n",
            crate::support::cache_dir()
        ),
    )
    .unwrap();
    let output = warren(&world, &["tools", "--profile", "reader"]);
    let listing = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        listing.starts_with("read_file  [files, built-in]"),
        "{listing}"
    );
    assert!(
        listing.ends_with("\nnot for profile `reader`: edit_file, fetch, glob, grep, http_get, list_dir, search_text, write_file (left out by its `tools` and `disallowed_tools`)\n"),
        "{listing}"
    );

    let output = warren(&world, &["tools", "--profile", "everything"]);
    assert!(
        text(&output.stdout).ends_with("\nnot for profile `everything`: run_js, run_python (they run code the model writes: a profile gets them only by naming them in `tools`)\n"),
        "{}",
        text(&output.stdout)
    );
    // The JSON keeps its shape: the tools the profile gets.
    let output = warren(&world, &["tools", "--profile", "reader", "--json"]);
    let tools: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(tools.as_array().unwrap().len(), 1);
}

#[test]
fn call_prints_the_result_or_the_error_with_exit_code_1() {
    let world = World::new();
    world.config(PROFILES);
    let output = warren(
        &world,
        &["call", "read_file", r#"{"path":"/docs/notes.md"}"#],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stdout),
        "alpha\nthe quick brown fox\nomega\n\n"
    );

    let output = warren(
        &world,
        &["call", "write_file", r#"{"path":"/docs/x","content":"x"}"#],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("error: write_file failed: denied"),
        "{}",
        text(&output.stderr)
    );
    assert!(output.stdout.is_empty());

    let output = warren(
        &world,
        &[
            "call",
            "http_get",
            r#"{"url":"http://example.com/"}"#,
            "--profile",
            "crawler",
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("denied") && stderr.contains("capabilities.net"),
        "{stderr}"
    );
}

/// A guest's `std::io::Error` prints "(os error N)" with a WASI errno, which a reader
/// takes for a Linux one (WASI's 63 is EPERM, Linux's 63 ENOSR): tool errors give the
/// words right for WASI and no number.
#[test]
fn file_errors_are_words_without_wasi_errno_numbers() {
    let world = World::new();
    world.config(PROFILES);
    for (tool, arguments, words) in [
        ("read_file", r#"{"path":"/docs"}"#, "/docs: is a directory"),
        (
            "read_file",
            r#"{"path":"/docs/notes.md/x"}"#,
            "/docs/notes.md/x: not a directory",
        ),
        (
            "list_dir",
            r#"{"path":"/docs/notes.md"}"#,
            "/docs/notes.md: not a directory",
        ),
        (
            "write_file",
            r#"{"path":"/docs/x","content":"x"}"#,
            "failed: denied: /docs/x",
        ),
    ] {
        let output = warren(&world, &["call", tool, arguments]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(words) && !stderr.contains("os error"),
            "{tool} {arguments}: {stderr}"
        );
    }
}

/// WASI answers a relative path, or one outside every grant, only with "no such file":
/// the error names the granted directories, so the model learns where to look, and a
/// write refused under a read-only grant says that.
#[test]
fn file_errors_name_the_granted_directories() {
    let world = World::new();
    world.config(
        r#"
[profiles.main.capabilities]
fs = [{ host = "docs", guest = "/docs" }, { host = "out", guest = "/out", mode = "rw" }]
scratch = true
"#,
    );
    let grants = "/docs (read-only), /out, /scratch";
    for (tool, arguments, message) in [
        (
            "read_file",
            r#"{"path":"notes.md"}"#,
            format!("read_file failed: notes.md: no such file or directory; paths are absolute, under the granted directories: {grants}"),
        ),
        (
            "list_dir",
            r#"{"path":"docs/nope"}"#,
            format!("list_dir failed: docs/nope: no such file or directory; paths are absolute, under the granted directories: {grants}"),
        ),
        (
            "read_file",
            r#"{"path":"/etc/passwd"}"#,
            format!("read_file failed: denied: /etc/passwd is outside the granted directories: {grants}"),
        ),
        (
            "read_file",
            r#"{"path":"/docs/../secret.txt"}"#,
            format!("read_file failed: denied: /docs/../secret.txt is outside the granted directories: {grants}"),
        ),
        (
            "write_file",
            r#"{"path":"/docs/new.md","content":"x"}"#,
            "write_file failed: denied: /docs/new.md: /docs is read-only for this profile".to_string(),
        ),
    ] {
        let output = warren(&world, &["call", tool, arguments]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("error: {message}\n")),
            "{tool} {arguments}: {stderr}"
        );
    }
}

/// Two plugins offering the same tool: the error names both files and the
/// `[plugins.NAME]` keys that settle it, and the keys it suggests work.
#[test]
fn a_tool_name_clash_names_both_plugins_and_the_fix() {
    let world = World::new();
    for copy in ["web-a.wasm", "web-b.wasm"] {
        std::fs::copy(&crate::support::guests().http, world.path(copy)).unwrap();
    }
    let plugins = format!(
        "[plugins]\nfiles = [\"web-a.wasm\", \"web-b.wasm\"]\nbuiltins = false\ncache_dir = {:?}\n",
        crate::support::cache_dir()
    );
    std::fs::write(world.path("warren.toml"), &plugins).unwrap();
    let output = warren(&world, &["tools"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("tool `http_get` is offered by both web-a.wasm and web-b.wasm")
            && stderr.contains(
            r#"leave it out of web-b with `[plugins.web-b] hide = ["http_get"]`, or rename it with `[plugins.web-b] rename = { http_get = "web-b_http_get" }`"#
        ),
        "{stderr}"
    );

    std::fs::write(
        world.path("warren.toml"),
        format!("{plugins}[plugins.web-b]\nhide = [\"fetch\"]\nrename = {{ http_get = \"web-b_http_get\" }}\n"),
    )
    .unwrap();
    let output = warren(&world, &["tools"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("web-b_http_get  [web-b]"),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn configuration_errors_exit_2_naming_file_line_and_key() {
    let world = World::new();
    world.config("[profiles.main.capabilities]\nfuel = -5\n");
    let output = warren(&world, &["tools"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("warren.toml: TOML parse error at line 6")
            && stderr.contains("fuel = -5")
            && stderr.contains("must be between"),
        "{stderr}"
    );

    world.config(PROFILES);
    let output = warren(&world, &["call", "read_file", "{}", "--profile", "nobody"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("no profile `nobody` (defined: crawler, main)"),
        "{}",
        text(&output.stderr)
    );

    // A base URL without a scheme is refused before any request, naming the model.
    world.config(
        "[models.local]\nprovider = \"openai\"\nbase_url = \"localhost:11434/v1\"\nmodel = \"m\"\n[profiles.main]\nmodel = \"local\"\n",
    );
    let output = warren(&world, &["run", "hello"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains(
            "model `local`: base_url `localhost:11434/v1` is not an http:// or https:// URL with a host"
        ),
        "{}",
        text(&output.stderr)
    );

    // A model a program embedding warren answers in code: the binary has none for it.
    world.config("[models.mine]\nprovider = \"custom\"\n");
    let output = warren(&world, &["run", "hello"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("model `mine`: `provider = \"custom\"`"),
        "{}",
        text(&output.stderr)
    );

    let output = warren(&world, &["--config", "missing.toml", "tools"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("cannot read missing.toml"),
        "{}",
        text(&output.stderr)
    );
}

/// A reader that stops early (`warren tools | head -1`) ends the command quietly, as
/// with other Unix tools, instead of a panic on the closed pipe. The pipe's read end is
/// closed before warren starts, so every write meets it closed, with no race.
#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let world = World::new();
    let config = world.config(PROFILES);
    let config = config.to_str().unwrap();
    let files = crate::support::guests().files.to_str().unwrap();
    for args in [
        &["--config", config, "tools"][..],
        &["--config", config, "doctor"],
        &["--config", config, "agents"],
        &["plugin", "inspect", files],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = Command::new(env!("CARGO_BIN_EXE_warren"))
            .args(args)
            .current_dir(world.dir.path())
            .env_remove("WARREN_CONFIG")
            .env("RUST_LOG", "warn")
            .stdout(writer)
            .output()
            .unwrap();
        let stderr = text(&output.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

#[test]
fn every_command_has_help() {
    let world = World::new();
    for args in [
        &["--help"][..],
        &["tools", "--help"],
        &["call", "--help"],
        &["run", "--help"],
    ] {
        let output = warren(&world, args);
        assert!(output.status.success(), "{args:?}");
        assert!(text(&output.stdout).contains("Usage: warren"), "{args:?}");
    }
}

#[test]
fn run_executes_the_offline_demo() {
    crate::support::guests();
    let world = World::new();
    let config = crate::support::demo_config();
    let config = config.to_str().unwrap();
    let output = warren(
        &world,
        &["--config", config, "run", "Summarise the documents."],
    );
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    assert!(
        stdout.starts_with("Summary of 2025 energy notes:"),
        "{stdout}"
    );
    let rows: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(" researcher ") && !l.starts_with('['))
        .collect();
    assert_eq!(rows.len(), 3, "{stderr}");
    assert!(
        stderr.contains("] started researcher (solar notes): Summarise /docs/solar.md"),
        "plain progress when not a terminal: {stderr}"
    );
    assert!(rows.iter().all(|r| r.contains(" ok ")), "{stderr}");
    assert!(
        stderr.contains("denied: /docs/hydro-notes.md"),
        "the denial is logged: {stderr}"
    );
    assert!(stderr.contains("total cost $"), "{stderr}");

    let output = warren(&world, &["--config", config, "run", "x", "--model", "nope"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("no model `nope` (defined: scripted)"),
        "{}",
        text(&output.stderr)
    );
    let output = warren(
        &world,
        &["--config", config, "run", "x", "--profile", "nobody"],
    );
    assert_eq!(output.status.code(), Some(2));
}

#[tokio::test]
async fn ctrl_c_cancels_the_run_cleanly() {
    let world = World::new();
    let server = crate::fake_llm::FakeLlm::start().await;
    server.route("HANG-ROOT", crate::fake_llm::Reply::Hang);
    world.config(&format!(
        "[models.fake]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"CARGO_PKG_NAME\"\n[profiles.main]\n",
        server.base_url
    ));
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["run", "HANG-ROOT"])
        .current_dir(world.dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while server.requests().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().unwrap().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("warren exits promptly after Ctrl-C")
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cancelling every agent"), "{stderr}");
    assert!(
        stderr.contains("the root agent ended cancelled"),
        "{stderr}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        server
            .hang_dropped
            .load(std::sync::atomic::Ordering::SeqCst),
        "the model request was aborted"
    );
}

#[test]
fn plugin_inspect_shows_tools_imports_and_misfits() {
    let world = World::new();
    let files = &crate::support::guests().files;
    let output = warren(&world, &["plugin", "inspect", files.to_str().unwrap()]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        stdout.contains("  wasi:filesystem/preopens@0.2.12")
            && stdout.contains("  warren:plugin/tool@0.1.0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  read_file: Read a UTF-8 text file")
            && stdout.contains(r#""required":["path"]"#),
        "{stdout}"
    );

    // The smallest valid component: it exports nothing.
    let empty = world.path("empty.wasm");
    std::fs::write(&empty, b"\0asm\x0d\x00\x01\x00").unwrap();
    let output = warren(&world, &["plugin", "inspect", empty.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("does not implement the warren:plugin/plugin world"),
        "{}",
        text(&output.stderr)
    );
    let output = warren(&world, &["plugin", "inspect", "missing.wasm"]);
    assert!(
        text(&output.stderr).contains("reading missing.wasm"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn plugin_componentize_names_a_bad_input() {
    let world = World::new();
    let bogus = world.path("bogus.wasm");
    std::fs::write(&bogus, b"not wasm").unwrap();
    let output = warren(
        &world,
        &[
            "plugin",
            "componentize",
            bogus.to_str().unwrap(),
            "-o",
            "out.wasm",
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("is not a core module with component type information"),
        "{}",
        text(&output.stderr)
    );
    assert!(!world.path("out.wasm").exists());
}

#[test]
fn a_bad_run_id_is_named() {
    let world = World::new();
    world.config(PROFILES);
    let output = warren(&world, &["run", "go", "--run-id", "no spaces!"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr
            .contains("--run-id: use letters, digits, `_` and `-` (at most 64), got `no spaces!`"),
        "{stderr}"
    );
}
