//! The bundled plugins and every capability used as intended, loading (cache, clashes,
//! bad files) and concurrency.

use std::sync::Arc;

use warren::ToolCallError;

use crate::support::{guests, http_server, load_plugins, World};

const READER: &str = r#"
[profiles.main.capabilities]
fs = [{ host = "docs", guest = "/docs", mode = "ro" }, { host = "out", guest = "/out", mode = "rw" }]
"#;

#[tokio::test]
async fn files_plugin_reads_lists_searches_and_writes() {
    let world = World::new();
    let (registry, access) = world.load(READER, "main").await;
    let call = |tool: &'static str, args: serde_json::Value| {
        let (registry, access) = (&registry, &access);
        async move { registry.call(access, tool, &args.to_string()).await }
    };
    assert_eq!(
        call("read_file", serde_json::json!({"path": "/docs/notes.md"}))
            .await
            .unwrap(),
        "alpha\nthe quick brown fox\nomega\n"
    );
    assert_eq!(
        call("list_dir", serde_json::json!({"path": "/docs"}))
            .await
            .unwrap(),
        "notes.md\t32\nsub/"
    );
    assert_eq!(
        call(
            "search_text",
            serde_json::json!({"path": "/docs", "pattern": "fox"})
        )
        .await
        .unwrap(),
        "/docs/notes.md:2: the quick brown fox\n/docs/sub/deep.txt:1: a fox in a subdirectory"
    );
    call(
        "write_file",
        serde_json::json!({"path": "/out/report.md", "content": "done"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(world.path("out/report.md")).unwrap(),
        "done"
    );
    let missing = call("read_file", serde_json::json!({"path": "/docs/nope.md"}))
        .await
        .unwrap_err();
    assert_eq!(
        missing.to_string(),
        "read_file failed: /docs/nope.md: no such file or directory"
    );
    let bad = call("read_file", serde_json::json!({"file": "/docs/notes.md"}))
        .await
        .unwrap_err();
    assert!(matches!(bad, ToolCallError::InvalidInput { .. }), "{bad}");
}

#[tokio::test]
async fn arguments_must_be_a_json_object_and_tools_must_be_in_the_profile() {
    let world = World::new();
    let profile = "[profiles.main]\ntools = [\"read_file\", \"list_*\"]\n";
    let (registry, access) = world.load(profile, "main").await;
    for bad in ["not json", "[1]", "\"x\""] {
        let error = registry.call(&access, "read_file", bad).await.unwrap_err();
        assert!(
            matches!(error, ToolCallError::InvalidInput { .. }),
            "{bad}: {error}"
        );
    }
    let error = registry
        .call(&access, "write_file", "{}")
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "no tool `write_file` is available to profile `main` (available: list_dir, read_file)"
    );
}

#[tokio::test]
async fn scratch_is_private_writable_and_removed() {
    let world = World::new();
    let (registry, access) = world
        .load("[profiles.main.capabilities]\nscratch = true\n", "main")
        .await;
    assert_eq!(
        registry.call(&access, "scratch", "{}").await.unwrap(),
        "kept"
    );
    let dir = access.scratch_dir().unwrap().to_path_buf();
    assert_eq!(
        std::fs::read_to_string(dir.join("note.txt")).unwrap(),
        "kept"
    );
    drop(access);
    assert!(!dir.exists(), "scratch directory removed with its owner");

    let (registry, access) = world.load("[profiles.main]\n", "main").await;
    assert!(
        registry.call(&access, "scratch", "{}").await.is_err(),
        "no scratch unless granted"
    );
}

#[tokio::test]
async fn granted_environment_variables_are_visible() {
    let world = World::new();
    let profile = "[profiles.main.capabilities]\nenv = [\"PATH\", { name = \"GREETING\", value = \"hello\" }, \"WARREN_SURELY_UNSET\"]\n";
    let (registry, access) = world.load(profile, "main").await;
    let path = std::env::var("PATH").unwrap();
    assert_eq!(
        registry
            .call(&access, "env", r#"{"name":"PATH"}"#)
            .await
            .unwrap(),
        format!("{path} (2 visible)")
    );
    assert_eq!(
        registry
            .call(&access, "env", r#"{"name":"GREETING"}"#)
            .await
            .unwrap(),
        "hello (2 visible)"
    );
}

#[tokio::test]
async fn http_get_reaches_an_allowed_host() {
    let world = World::new();
    let (port, served) = http_server("hello from the test server").await;
    let profile = format!("[profiles.main.capabilities]\nnet = [\"127.0.0.1:{port}\"]\n");
    let (registry, access) = world.load(&profile, "main").await;
    let output = registry
        .call(
            &access,
            "http_get",
            &format!(r#"{{"url":"http://127.0.0.1:{port}/page?q=1"}}"#),
        )
        .await
        .unwrap();
    assert!(output.starts_with("HTTP 200\n"), "{output}");
    assert!(
        output.contains("content-type: text/plain") && !output.contains("x-noise"),
        "{output}"
    );
    assert!(
        output.ends_with("\n\nhello from the test server"),
        "{output}"
    );
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 1);

    let big: &'static str = Box::leak("a".repeat(100 * 1024).into_boxed_str());
    let (port, _) = http_server(big).await;
    let profile = format!("[profiles.main.capabilities]\nnet = [\"127.0.0.1:{port}\"]\n");
    let (registry, access) = world.load(&profile, "main").await;
    let output = registry
        .call(
            &access,
            "http_get",
            &format!(r#"{{"url":"http://127.0.0.1:{port}/"}}"#),
        )
        .await
        .unwrap();
    assert!(
        output.ends_with("[body cut after 64 KiB]"),
        "{}",
        &output[output.len() - 40..]
    );
}

#[tokio::test]
async fn raw_tcp_reaches_a_literally_listed_address() {
    let world = World::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let profile = format!("[profiles.main.capabilities]\nnet = [\"127.0.0.1:{port}\"]\n");
    let (registry, access) = world.load(&profile, "main").await;
    let output = registry
        .call(
            &access,
            "tcp",
            &format!(r#"{{"ip":"127.0.0.1","port":{port}}}"#),
        )
        .await
        .unwrap();
    assert_eq!(output, format!("connected to 127.0.0.1:{port}"));
}

#[tokio::test]
async fn sixty_four_concurrent_calls_complete_correctly() {
    let world = World::new();
    let (registry, access) = world.load(READER, "main").await;
    let access = Arc::new(access);
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..64 {
        let (registry, access) = (registry.clone(), access.clone());
        calls.spawn(async move {
            let result = if i % 2 == 0 {
                registry
                    .call(&access, "echo", &format!(r#"{{"call":{i}}}"#))
                    .await
            } else {
                registry
                    .call(&access, "read_file", r#"{"path":"/docs/sub/deep.txt"}"#)
                    .await
            };
            (i, result.unwrap())
        });
    }
    let mut seen = 0;
    while let Some(joined) = calls.join_next().await {
        let (i, output) = joined.unwrap();
        let expected = if i % 2 == 0 {
            format!(r#"{{"call":{i}}}"#)
        } else {
            "a fox in a subdirectory\n".to_string()
        };
        assert_eq!(output, expected);
        seen += 1;
    }
    assert_eq!(seen, 64);
}

#[tokio::test]
async fn tool_name_clash_names_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.wasm"), dir.path().join("b.wasm"));
    std::fs::copy(&guests().files, &a).unwrap();
    std::fs::copy(&guests().files, &b).unwrap();
    let error = load_plugins(dir.path(), &[a.clone(), b.clone()], true)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains(&a.display().to_string()) && error.contains(&b.display().to_string()),
        "{error}"
    );
    assert!(
        error.contains("tool `read_file` is offered by both"),
        "{error}"
    );
}

#[tokio::test]
async fn a_file_that_is_not_a_plugin_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("bogus.wasm");
    std::fs::write(&bogus, b"\0asm not really").unwrap();
    let error = load_plugins(dir.path(), std::slice::from_ref(&bogus), false)
        .await
        .err()
        .unwrap();
    assert!(
        format!("{error:#}").contains(&format!(
            "{} is not a valid WebAssembly component",
            bogus.display()
        )),
        "{error:#}"
    );
}
