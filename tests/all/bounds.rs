//! Every host resource a guest can make the host spend is bounded per call, each bound
//! a named capability key: handles (and so descriptors), host memory behind network
//! handles, log records, disk writes and scratch space; and at load, the size of tool
//! lists and the host's own tool names. Each attack below is a fixture that tries it;
//! each test checks the specific error, that the host stayed within bounds, and that
//! other calls meanwhile were unaffected.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use warren::{Config, ToolAccess, ToolCallError};

use crate::support::{cache_dir, guests, load_plugins, World};

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Peak resident memory of a child process, sampled every 5 ms until it exits.
fn peak_rss_kb(mut command: Command) -> (std::process::Output, u64) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        if let Ok(status) = std::fs::read_to_string(&status_path) {
            if let Some(kb) = status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
            {
                peak = peak.max(kb);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (child.wait_with_output().unwrap(), peak)
}

fn warren(world: &World, args: &[&str], log: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warren"));
    command
        .args(args)
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", log);
    command
}

const GRANTS: &str = r#"
[profiles.main.capabilities]
fs = [{ host = "docs", guest = "/docs", mode = "ro" }, { host = "out", guest = "/out", mode = "rw" }]
"#;

/// Attack 1: a tool opens a granted file 100,000 times without closing. Its call ends
/// at `max_handles`; the process's descriptors stay bounded; trusted `read_file`
/// calls running at the same time all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn descriptor_exhaustion_ends_at_max_handles() {
    let world = World::new();
    let (registry, access) = world.load(GRANTS, "main").await;
    let before = open_descriptors();
    let peak = Arc::new(std::sync::atomic::AtomicUsize::new(before));
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        std::thread::spawn(move || {
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(open_descriptors(), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let arguments = json!({"path": "/docs/notes.md", "count": 100_000}).to_string();
    let attack = registry.call(&access, "open_many", &arguments);
    let trusted = async {
        let mut results = Vec::new();
        for _ in 0..40 {
            results.push(
                registry
                    .call(
                        &access,
                        "read_file",
                        &json!({"path": "/docs/notes.md"}).to_string(),
                    )
                    .await,
            );
        }
        results
    };
    let (attack, trusted) = tokio::join!(attack, trusted);
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    sampler.join().unwrap();
    let error = attack.unwrap_err();
    // The limit the call met: `max_handles`, cut to the call's share of the process's
    // descriptors.
    let ToolCallError::ResourceLimit {
        key: "max_handles",
        limit,
        ..
    } = &error
    else {
        panic!("{error}")
    };
    let limit = *limit as usize;
    assert!(
        error.to_string().contains("raise capabilities.max_handles"),
        "{error}"
    );
    for result in trusted {
        assert_eq!(result.unwrap(), "alpha\nthe quick brown fox\nomega\n");
    }
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        peak <= before + limit + 64,
        "descriptors peaked at {peak} (before {before}, per-call cap {limit})"
    );
    // Everything the call opened is closed with its store.
    assert!(
        open_descriptors() <= before + 8,
        "{} open after, {before} before",
        open_descriptors()
    );
    // The next call on the same host works.
    registry.call(&access, "echo", "{}").await.unwrap();
}

/// Attack 2: a tool creates wasi:http `fields` handles of 100 KiB each. With no `net`
/// grant the network interfaces are not linked at all, so the first one is a denial;
/// with a grant, the host memory they can pin is bounded by `max_handles` times a
/// per-handle size that makes them fit in `memory_mb`.
#[test]
fn host_memory_behind_network_handles_is_bounded() {
    let world = World::new();
    world.config("[defaults.capabilities]\nmemory_mb = 64\n[profiles.main]\n[profiles.online.capabilities]\nmemory_mb = 64\nnet = [\"127.0.0.1\"]\n");
    let (output, peak) = peak_rss_kb(warren(
        &world,
        &["call", "http_fields", r#"{"count": 100000, "kb": 100}"#],
        "warn",
    ));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("denied network access (wasi:http/types")
            && stderr.contains("capability capabilities.net"),
        "{stderr}"
    );
    assert!(peak < 200 * 1024, "peak RSS {peak} KiB");

    // Granted: 100 KiB values no longer fit one handle (64 MiB / 1024 handles).
    let (output, _) = peak_rss_kb(warren(
        &world,
        &[
            "call",
            "http_fields",
            r#"{"count": 100000, "kb": 100}"#,
            "--profile",
            "online",
        ],
        "warn",
    ));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("host-held HTTP header fields")
            && stderr.contains("raise capabilities.memory_mb = 64"),
        "{stderr}"
    );
    // Small ones: as many handles as allowed, then the call ends at max_handles, and
    // the host held at most memory_mb for them.
    let (output, peak) = peak_rss_kb(warren(
        &world,
        &[
            "call",
            "http_fields",
            r#"{"count": 100000, "kb": 48}"#,
            "--profile",
            "online",
        ],
        "warn",
    ));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("raise capabilities.max_handles = 1024"),
        "{stderr}"
    );
    assert!(
        peak < 300 * 1024,
        "peak RSS {peak} KiB with 1024 handles of at most 64 KiB"
    );
}

/// Attack 3: a million empty log records. Each costs at least 128 bytes of
/// `max_log_kb`, so 512 are logged and the drop is reported once.
#[test]
fn a_log_flood_is_charged_per_record_and_reported_once() {
    let world = World::new();
    world.config("[profiles.main]\n");
    let started = Instant::now();
    let output = warren(
        &world,
        &["call", "log", r#"{"count": 1000000, "size": 0}"#],
        "info",
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.len() < 256 * 1024,
        "{} bytes of stderr",
        stderr.len()
    );
    let records = stderr
        .lines()
        .filter(|l| l.contains(" INFO ") && l.ends_with(":  profile=main plugin=hostile"))
        .count();
    assert_eq!(records, 512, "records logged");
    assert!(
        stderr
            .contains("999488 log records dropped: the plugin passed capabilities.max_log_kb = 64"),
        "{}",
        &stderr[stderr.len().saturating_sub(2000)..]
    );
    assert!(started.elapsed() < Duration::from_secs(60));
}

/// Attack 4: writing without end, into scratch and into a writable grant. The call
/// that crosses `scratch_mb` fails and its file is removed; the one that crosses
/// `max_write_mb` fails and leaves what it wrote, as the error says.
#[tokio::test]
async fn disk_floods_end_at_scratch_mb_and_max_write_mb() {
    let world = World::new();
    let profile = r#"
[profiles.main.capabilities]
fs = [{ host = "out", guest = "/out", mode = "rw" }]
scratch = true
scratch_mb = 8
max_write_mb = 4
[profiles.roomy.capabilities]
scratch = true
scratch_mb = 8
max_write_mb = 64
"#;
    let (registry, access) = world.load(profile, "main").await;
    let error = registry
        .call(
            &access,
            "fill",
            &json!({"path": "/out/big", "mb": 100}).to_string(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ToolCallError::ResourceLimit {
                key: "max_write_mb",
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("left as written"), "{error}");
    assert_eq!(
        std::fs::metadata(world.path("out/big")).unwrap().len(),
        4 << 20
    );

    let config = Config::load(&world.path("warren.toml")).unwrap();
    let roomy = ToolAccess::new(config.profile("roomy").unwrap()).unwrap();
    let error = registry
        .call(
            &roomy,
            "fill",
            &json!({"path": "/scratch/big", "mb": 100}).to_string(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ToolCallError::ResourceLimit {
                key: "scratch_mb",
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("removed"), "{error}");
    let scratch = roomy.scratch_dir().unwrap();
    assert!(!scratch.join("big").exists());
    // Within the bounds, writing works, and counts against scratch across calls.
    registry
        .call(
            &roomy,
            "fill",
            &json!({"path": "/scratch/a", "mb": 5}).to_string(),
        )
        .await
        .unwrap();
    let error = registry
        .call(
            &roomy,
            "fill",
            &json!({"path": "/scratch/b", "mb": 5}).to_string(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ToolCallError::ResourceLimit {
                key: "scratch_mb",
                ..
            }
        ),
        "{error}"
    );
    assert!(scratch.join("a").exists() && !scratch.join("b").exists());
    registry
        .call(
            &access,
            "write_file",
            &json!({"path": "/out/small.txt", "content": "fine"}).to_string(),
        )
        .await
        .unwrap();
}

/// Attacks 5 and 6: a plugin offering 100,000 tools, and one offering `spawn_agent`,
/// are refused at load with errors naming them; `warren tools` never prints them.
#[tokio::test]
async fn tool_list_bombs_and_host_tool_names_are_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let error = load_plugins(dir.path(), std::slice::from_ref(&guests().toolbomb), true)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("toolbomb.wasm: offers 100000 tools; a plugin may offer at most 256 ([plugins] max_tools)"),
        "{error}"
    );
    let error = load_plugins(dir.path(), std::slice::from_ref(&guests().impostor), true)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains(
            "impostor.wasm: tool name `spawn_agent` is reserved for the host's spawn tools"
        ),
        "{error}"
    );

    // Through the binary: exit 1 naming the plugin, nothing on stdout.
    let world = World::new();
    std::fs::write(
        world.path("warren.toml"),
        format!(
            "[plugins]\nfiles = [{:?}]\ncache_dir = {:?}\n",
            guests().toolbomb,
            cache_dir()
        ),
    )
    .unwrap();
    let output = warren(&world, &["tools", "--json"], "warn")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert!(String::from_utf8_lossy(&output.stderr).contains("max_tools"));

    // A profile whose tools together pass max_profile_tools_kb is refused by name.
    let world = World::new();
    world.config("[plugins]\n");
    let text = std::fs::read_to_string(world.path("warren.toml"))
        .unwrap()
        .replace(
            "[plugins]\nfiles",
            "[plugins]\nmax_profile_tools_kb = 1\nfiles",
        );
    std::fs::write(
        world.path("warren.toml"),
        text.replace("\n\n[plugins]\n", "\n"),
    )
    .unwrap();
    let output = warren(&world, &["tools"], "warn").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("profile `main` sees") && stderr.contains("max_profile_tools_kb"),
        "{stderr}"
    );
}
