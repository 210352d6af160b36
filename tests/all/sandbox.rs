//! Hostile guests: each attack is stopped with its specific error, nothing outside the
//! granted directories changes, and the next call on the same host still works.

use std::path::PathBuf;

use warren::OutputKind;
use warren::{ToolAccess, ToolCallError, ToolRegistry};

use crate::support::{guests, http_server, tree_digest, World};

const PROFILE: &str = r#"
[profiles.main.capabilities]
fs = [{ host = "docs", guest = "/docs" }, { host = "out", guest = "/out", mode = "rw" }]
fuel = 200_000_000
tool_timeout_ms = 2000
memory_mb = 32
max_output_kb = 64
"#;

/// Calls `tool`, then checks the host still serves a trivial call.
async fn attack(
    registry: &ToolRegistry,
    access: &ToolAccess,
    tool: &str,
    arguments: &str,
) -> ToolCallError {
    let error = registry
        .call(access, tool, arguments)
        .await
        .expect_err(&format!("{tool} {arguments} should fail"));
    let echo = registry
        .call(access, "echo", r#"{"after":"attack"}"#)
        .await
        .expect("the next call works");
    assert_eq!(echo, r#"{"after":"attack"}"#);
    error
}

/// The world outside `out/` (the only writable grant), to compare before and after.
fn protected(world: &World) -> Vec<(PathBuf, Vec<u8>)> {
    let out = world.path("out");
    tree_digest(world.dir.path())
        .into_iter()
        .filter(|(path, _)| !path.starts_with(&out))
        .collect()
}

#[tokio::test]
async fn infinite_loop_runs_out_of_fuel() {
    let world = World::new();
    let (registry, access) = world.load(PROFILE, "main").await;
    let error = attack(&registry, &access, "spin", "{}").await;
    assert!(
        matches!(
            error,
            ToolCallError::OutOfFuel {
                fuel: 200_000_000,
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("capabilities.fuel = 200000000 in profile `main`"),
        "{error}"
    );
}

/// Each call reports the fuel its guest burned: more for more work, never past the
/// limit, all of it for a call that ran out; none for a call no guest ran. Its output
/// is counted in bytes, an error by its message.
#[tokio::test]
async fn a_call_reports_the_fuel_it_burned_and_the_bytes_it_returned() {
    let world = World::new();
    let (registry, access) = world.load(PROFILE, "main").await;
    let short = registry
        .call_measured(&access, "burn", r#"{"loops":1000000}"#)
        .await;
    let long = registry
        .call_measured(&access, "burn", r#"{"loops":2000000}"#)
        .await;
    assert_eq!(short.result.unwrap(), "burned");
    assert_eq!(short.figures.output_bytes, "burned".len() as u64);
    let (short, long) = (
        short.figures.fuel_used.unwrap(),
        long.figures.fuel_used.unwrap(),
    );
    // Every pass of the loop costs at least one unit of fuel.
    assert!(short >= 1_000_000, "{short}");
    assert!(long >= short + 1_000_000, "{short} then {long}");
    assert!(long < 200_000_000, "{long}");

    let spin = registry.call_measured(&access, "spin", "{}").await;
    assert_eq!(spin.figures.fuel_used, Some(200_000_000));
    let error = spin.result.unwrap_err();
    assert!(matches!(error, ToolCallError::OutOfFuel { .. }), "{error}");
    assert_eq!(spin.figures.output_bytes, error.to_string().len() as u64);

    let unknown = registry.call_measured(&access, "no_such_tool", "{}").await;
    assert!(unknown.result.is_err());
    assert_eq!(unknown.figures.fuel_used, None);
}

#[tokio::test]
async fn infinite_loop_with_ample_fuel_hits_the_wall_clock() {
    let world = World::new();
    let profile = "[profiles.main.capabilities]\nfuel = 1_000_000_000_000\ntool_timeout_ms = 300\n";
    let (registry, access) = world.load(profile, "main").await;
    let started = std::time::Instant::now();
    let error = attack(&registry, &access, "spin", "{}").await;
    assert!(
        matches!(error, ToolCallError::Timeout { limit_ms: 300, .. }),
        "{error}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[tokio::test]
async fn blocking_host_call_is_cut_by_the_timeout() {
    let world = World::new();
    let (registry, access) = world.load(PROFILE, "main").await;
    let error = attack(&registry, &access, "sleep", r#"{"ms":60000}"#).await;
    assert!(
        matches!(error, ToolCallError::Timeout { limit_ms: 2000, .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("capabilities.tool_timeout_ms"),
        "{error}"
    );
}

#[tokio::test]
async fn memory_bomb_hits_the_memory_limit() {
    let world = World::new();
    let (registry, access) = world.load(PROFILE, "main").await;
    let error = attack(&registry, &access, "alloc", r#"{"mb":100}"#).await;
    assert!(
        matches!(error, ToolCallError::MemoryLimit { limit_mb: 32, .. }),
        "{error}"
    );
    assert_eq!(
        registry
            .call(&access, "alloc", r#"{"mb":8}"#)
            .await
            .unwrap(),
        "allocated 8 MiB"
    );
}

#[tokio::test]
async fn path_escapes_are_refused() {
    let world = World::new();
    let secret = world.path("secret.txt");
    std::os::unix::fs::symlink(&secret, world.path("docs/abs_link")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", world.path("docs/rel_link")).unwrap();
    let (registry, access) = world.load(PROFILE, "main").await;
    let before = protected(&world);
    let attempts = [
        "/docs/../secret.txt".to_string(),
        "/docs/sub/../../secret.txt".to_string(),
        secret.display().to_string(),
        "/docs/abs_link".to_string(),
        "/docs/rel_link".to_string(),
        "../secret.txt".to_string(),
    ];
    for path in attempts {
        let error = attack(
            &registry,
            &access,
            "read_file",
            &serde_json::json!({ "path": path }).to_string(),
        )
        .await;
        assert!(
            matches!(error, ToolCallError::Failed { .. }),
            "{path}: {error}"
        );
        assert!(!error.to_string().contains("TOP SECRET"), "{path}: {error}");
    }
    // Symlinks the guest makes itself, in a directory it may write.
    for target in ["../secret.txt", secret.to_str().unwrap()] {
        let arguments =
            serde_json::json!({ "dir": "/out", "target": target, "link": "escape" }).to_string();
        let error = attack(&registry, &access, "symlink", &arguments).await;
        assert!(
            !error.to_string().contains("TOP SECRET"),
            "{target}: {error}"
        );
        let _ = std::fs::remove_file(world.path("out/escape"));
    }
    assert_eq!(before, protected(&world), "nothing outside out/ changed");
}

#[tokio::test]
async fn writing_through_a_read_only_preopen_is_denied() {
    let world = World::new();
    let (registry, access) = world.load(PROFILE, "main").await;
    let before = protected(&world);
    for path in ["/docs/new.txt", "/docs/notes.md"] {
        let arguments = serde_json::json!({ "path": path, "content": "overwritten" }).to_string();
        let error = attack(&registry, &access, "write_file", &arguments).await;
        assert!(error.to_string().contains("denied"), "{error}");
    }
    assert_eq!(before, protected(&world));
}

#[tokio::test]
async fn host_environment_and_argv_do_not_reach_the_guest() {
    let world = World::new();
    let (registry, access) = world.load(PROFILE, "main").await;
    assert!(std::env::var("PATH").is_ok(), "the host has PATH set");
    let error = attack(&registry, &access, "env", r#"{"name":"PATH"}"#).await;
    assert_eq!(error.to_string(), "env failed: not set (0 visible)");
    assert_eq!(registry.call(&access, "args", "{}").await.unwrap(), "");
}

#[tokio::test]
async fn http_to_a_host_not_allowed_is_denied() {
    let world = World::new();
    let (port, served) = http_server("hello").await;
    // The profile allows a different port on the same address, and a name.
    let profile = format!(
        "[profiles.main.capabilities]\nnet = [\"127.0.0.1:{}\", \"example.com\"]\n",
        port.wrapping_add(1)
    );
    let (registry, access) = world.load(&profile, "main").await;
    let arguments = format!(r#"{{"url":"http://127.0.0.1:{port}/"}}"#);
    let error = attack(&registry, &access, "http_get", &arguments).await;
    let ToolCallError::Denied {
        capability,
        request,
        ..
    } = &error
    else {
        panic!("{error}")
    };
    assert_eq!(capability, "capabilities.net");
    assert_eq!(request, &format!("HTTP request to 127.0.0.1:{port}"));
    // A name that resolves to loopback is refused unless listed as a literal address.
    let profile =
        format!("[profiles.main.capabilities]\nnet = [\"*.localhost:{port}\", \"127.0.0.2\"]\n");
    let (registry, access) = world.load(&profile, "main").await;
    let error = attack(
        &registry,
        &access,
        "http_get",
        &format!(r#"{{"url":"http://localhost:{port}/"}}"#),
    )
    .await;
    assert!(matches!(error, ToolCallError::Denied { .. }), "{error}");
    assert_eq!(
        served.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "no request reached the server"
    );
}

#[tokio::test]
async fn raw_tcp_to_a_disallowed_address_is_denied() {
    let world = World::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // Allowed: a name (never matches raw sockets) and another port.
    let profile = format!(
        "[profiles.main.capabilities]\nnet = [\"localhost\", \"127.0.0.1:{}\"]\n",
        port.wrapping_add(1)
    );
    let (registry, access) = world.load(&profile, "main").await;
    let error = attack(
        &registry,
        &access,
        "tcp",
        &format!(r#"{{"ip":"127.0.0.1","port":{port}}}"#),
    )
    .await;
    let ToolCallError::Denied { request, .. } = &error else {
        panic!("{error}")
    };
    assert!(request.contains(&format!("127.0.0.1:{port}")), "{error}");
    assert!(
        listener.accept().is_err(),
        "no connection reached the listener"
    );
}

#[tokio::test]
async fn a_huge_result_is_refused() {
    let world = World::new();
    let profile = "[profiles.main.capabilities]\nmemory_mb = 512\nmax_output_kb = 64\n";
    let (registry, access) = world.load(profile, "main").await;
    let error = attack(&registry, &access, "big_result", r#"{"mb":100}"#).await;
    assert!(
        matches!(
            error,
            ToolCallError::OutputTooLarge {
                kind: OutputKind::Result,
                limit_kb: 64,
                size: Some(104_857_600),
                ..
            }
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_stdout_flood_is_stopped() {
    let world = World::new();
    let (registry, access) = world.load(PROFILE, "main").await;
    let error = attack(&registry, &access, "flood", r#"{"mb":50}"#).await;
    assert!(
        matches!(
            error,
            ToolCallError::OutputTooLarge {
                kind: OutputKind::Stdout,
                limit_kb: 64,
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("capabilities.max_output_kb = 64"),
        "{error}"
    );
}

#[tokio::test]
async fn a_panic_is_reported_as_a_crash_with_its_message() {
    let world = World::new();
    let (registry, access) = world.load(PROFILE, "main").await;
    let error = attack(&registry, &access, "panic", "{}").await;
    let ToolCallError::Trap {
        plugin, message, ..
    } = &error
    else {
        panic!("{error}")
    };
    assert_eq!(plugin, "hostile");
    assert!(
        message.contains("unreachable") && message.contains("panicked on purpose"),
        "{message}"
    );
}

#[tokio::test]
async fn log_records_are_accepted_and_bounded() {
    let world = World::new();
    let (registry, access) = world.load(PROFILE, "main").await;
    // Far past the per-call log budget: dropped, not an error.
    assert_eq!(
        registry
            .call(&access, "log", r#"{"count":20000}"#)
            .await
            .unwrap(),
        "logged"
    );
}

#[tokio::test]
async fn every_hostile_tool_has_a_test() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = crate::support::load_plugins(dir.path(), &[guests().hostile.clone()], true)
        .await
        .unwrap();
    let tools: Vec<&str> = hostile.tool_names().collect();
    let tests = [
        include_str!("sandbox.rs"),
        include_str!("plugins.rs"),
        include_str!("bounds.rs"),
    ]
    .concat();
    assert!(tools.len() >= 13);
    for tool in tools {
        assert!(
            tests.contains(&format!("\"{tool}\"")),
            "hostile tool `{tool}` has no test calling it"
        );
    }
}

/// Every call gets a fresh instance: what one call leaves in its memory (a static, or
/// heap it grew) is gone for the next, however the pool reuses and resets memory slots
/// (pages kept resident between instances are copied back to the image, grown pages
/// zeroed). Calls run one after another and then at once, so slots are reused.
#[tokio::test]
async fn no_call_sees_what_an_earlier_call_left_in_memory() {
    let world = World::new();
    let (registry, access) = world.load(PROFILE, "main").await;
    for _ in 0..20 {
        let seen = registry.call(&access, "remember", "{}").await.unwrap();
        assert_eq!(seen, "static clean, heap clean");
    }
    let calls = (0..16).map(|_| registry.call(&access, "remember", "{}"));
    for seen in futures_util::future::join_all(calls).await {
        assert_eq!(seen.unwrap(), "static clean, heap clean");
    }
}
