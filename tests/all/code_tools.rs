//! The built-in code-running tools, `run_python` and `run_js`: through the `warren`
//! binary, an agent computes from a CSV in its read-only grant and writes into its
//! writable one; hostile code meets the sandbox's limits with errors naming them; a
//! profile that does not name the tools never sees them; no call sees another's state
//! or the snapshot's random seed.

use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::fake_llm::{model_table, FakeLlm, Reply};
use crate::support::{cache_dir, text, World};

/// The most tool calls a model reply runs (docs/limits.md: 256).
const MAX_TOOL_CALLS_PER_REPLY: usize = 256;

/// A project: `data/sales.csv` (granted read-only at /project), `out/` (granted
/// read-write at /scratch), `secret.txt` beside them, and a `warren.toml` whose `main`
/// profile names both tools and whose `plain` profile takes every tool by pattern.
fn project(models: &str, capabilities: &str) -> World {
    compiled();
    let world = World::new();
    std::fs::create_dir(world.path("data")).unwrap();
    std::fs::write(
        world.path("data/sales.csv"),
        "region,units,price\nnorth,10,2.5\nsouth,7,3\nnorth,9,2\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc/passwd", world.path("data/passwd")).unwrap();
    std::os::unix::fs::symlink(world.path("secret.txt"), world.path("data/secret")).unwrap();
    std::fs::write(
        world.path("warren.toml"),
        format!(
            "[plugins]\ncache_dir = {:?}\n\n{models}\n\
             [defaults.capabilities]\n{capabilities}\n\
             [profiles.main]\ntools = [\"run_python\", \"run_js\"]\n\
             [profiles.main.capabilities]\nfs = [{{ host = \"data\", guest = \"/project\", mode = \"ro\" }}, {{ host = \"out\", guest = \"/scratch\", mode = \"rw\" }}]\n\n\
             [profiles.plain]\ntools = [\"*\"]\n\n\
             [profiles.narrow]\ntools = [\"run_python\"]\n",
            cache_dir()
        ),
    )
    .unwrap();
    world
}

/// Both interpreters compiled into the shared test cache once, before any test calls
/// them: otherwise every `warren call` process of a test would compile them at once.
fn compiled() {
    static ONCE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("warren.toml"),
            format!(
                "[plugins]\ncache_dir = {:?}\n[profiles.main]\ntools = [\"run_python\", \"run_js\"]\n",
                cache_dir()
            ),
        )
        .unwrap();
        for tool in ["run_python", "run_js"] {
            let output = Command::new(env!("CARGO_BIN_EXE_warren"))
                .args(["call", tool, r#"{"code": "1 + 1"}"#])
                .current_dir(dir.path())
                .env_remove("WARREN_CONFIG")
                .output()
                .unwrap();
            assert!(output.status.success(), "{}", text(&output.stderr));
        }
    });
}

fn warren(world: &World, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(args)
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .env("WARREN_TEST_SECRET", "do-not-leak")
        .output()
        .unwrap()
}

/// `warren call TOOL {"code": CODE}`: the parsed result, or the error text.
fn call(world: &World, tool: &str, code: &str) -> Result<Value, String> {
    let output = warren(world, &["call", tool, &json!({ "code": code }).to_string()]);
    if output.status.success() {
        Ok(serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&output.stdout))))
    } else {
        Err(text(&output.stderr))
    }
}

const PYTHON: &str = "import csv, statistics\n\
rows = list(csv.DictReader(open('/project/sales.csv')))\n\
mean = statistics.mean(int(r['units']) for r in rows)\n\
open('/scratch/mean.txt', 'w').write(f'{mean:.4f}')\n\
print(len(rows), 'rows')\n\
{'mean_units': mean}";

const JS: &str = "const [head, ...rows] = fs.readFile('/project/sales.csv').trim().split('\\n');\n\
const total = rows.map((r) => r.split(',')).reduce((t, [, units, price]) => t + units * price, 0);\n\
fs.writeFile('/scratch/total.txt', total.toFixed(2));\n\
console.log(head);\n\
({ revenue: total })";

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_computes_from_a_csv_with_run_python_and_run_js() {
    let server = FakeLlm::start().await;
    let world = project(&model_table(&server.base_url), "memory_mb = 256\n");
    server.push(Reply::tool_calls(
        &[("run_python", json!({ "code": PYTHON }))],
        (10, 5),
    ));
    server.push(Reply::tool_calls(
        &[("run_js", json!({ "code": JS }))],
        (10, 5),
    ));
    server.push(Reply::answer("Mean 8.67 units, revenue 64.", (10, 5)));
    let run = tokio::task::spawn_blocking({
        let dir = world.dir.path().to_path_buf();
        move || {
            Command::new(env!("CARGO_BIN_EXE_warren"))
                .args(["run", "-q", "total the sales"])
                .current_dir(dir)
                .env_remove("WARREN_CONFIG")
                .env("RUST_LOG", "warn")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_eq!(text(&run.stdout).trim(), "Mean 8.67 units, revenue 64.");

    let requests = server.requests();
    let offered: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"run_python") && offered.contains(&"run_js"),
        "{offered:?}"
    );
    let result = |request: usize| -> Value {
        let messages = requests[request].body["messages"].as_array().unwrap();
        let content = messages.last().unwrap()["content"].as_str().unwrap();
        serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}: {content}"))
    };
    let python = result(1);
    assert_eq!(python["value"]["mean_units"], json!(26.0 / 3.0), "{python}");
    assert_eq!(python["stdout"], "3 rows\n");
    let js = result(2);
    assert_eq!(js["value"], json!({ "revenue": 64 }), "{js}");
    assert_eq!(js["stdout"], "region,units,price\n");
    assert_eq!(
        std::fs::read_to_string(world.path("out/mean.txt")).unwrap(),
        "8.6667"
    );
    assert_eq!(
        std::fs::read_to_string(world.path("out/total.txt")).unwrap(),
        "64.00"
    );

    // The journal has each call's figures; `warren show` the code and the output.
    let journal = journal_records(&world);
    let finished: Vec<&Value> = journal
        .iter()
        .filter(|r| r["type"] == "tool_finished")
        .collect();
    assert_eq!(finished.len(), 2);
    for record in &finished {
        assert!(record["fuel_used"].as_u64().unwrap() > 0, "{record}");
        assert!(
            record["memory_peak_bytes"].as_u64().unwrap() > 1 << 20,
            "{record}"
        );
        assert!(record["output_bytes"].as_u64().unwrap() > 0, "{record}");
    }
    let agent = finished[0]["agent"].as_str().unwrap();
    let show = warren(&world, &["show", "last", "--agent", agent]);
    let shown = text(&show.stdout);
    assert!(show.status.success(), "{}", text(&show.stderr));
    assert!(shown.contains("┌ code\nimport csv, statistics"), "{shown}");
    assert!(
        shown.contains("fs.writeFile('/scratch/total.txt'"),
        "{shown}"
    );
    assert!(shown.contains(r#""stdout":"3 rows\n""#), "{shown}");
    assert_eq!(shown.matches("KiB)").count(), 2, "{shown}");

    // A profile that takes every tool by pattern does not get them.
    let listed = warren(&world, &["tools", "--profile", "plain", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"read_file"), "{names:?}");
    assert!(
        !names.contains(&"run_python") && !names.contains(&"run_js"),
        "{names:?}"
    );
    // An agent file names them as a profile does.
    std::fs::create_dir(world.path("agents")).unwrap();
    std::fs::write(
        world.path("agents/calc.md"),
        "---\nname: calc\ndescription: Computes\ntools: Read, run_js\n---\nYou compute.\n",
    )
    .unwrap();
    let listed = warren(&world, &["tools", "--profile", "calc", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&listed.stderr)));
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read_file", "run_js"]);
    let refused = warren(
        &world,
        &[
            "call",
            "--profile",
            "plain",
            "run_python",
            r#"{"code":"1"}"#,
        ],
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("run_python"),
        "{}",
        text(&refused.stderr)
    );
}

/// The records of the newest run's journal.
fn journal_records(world: &World) -> Vec<Value> {
    let runs = world.path(".warren/runs");
    let newest = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .max_by_key(|e| e.file_name())
        .unwrap()
        .path();
    std::fs::read_to_string(newest.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Each attack, the tool, its code, and what the error must say.
const ATTACKS: &[(&str, &str, &str)] = &[
    // Compute: fuel, wall time, a catastrophic regular expression.
    ("run_python", "while True: pass", "ran out of fuel"),
    ("run_js", "for (;;) {}", "ran out of fuel"),
    (
        "run_python",
        "import re\nre.match(r'(a+)+$', 'a' * 40 + 'b')",
        "ran out of fuel",
    ),
    (
        "run_js",
        "/(a+)+$/.test('a'.repeat(40) + 'b')",
        "ran out of fuel",
    ),
    (
        "run_python",
        "import time\ntime.sleep(60)",
        "tool_timeout_ms",
    ),
    // Memory.
    ("run_python", "x = bytearray(1 << 30)", "MemoryError"),
    (
        "run_python",
        "a = []\nwhile True: a.append(' ' * 10**6)",
        "MemoryError",
    ),
    (
        "run_js",
        "const a = []; for (;;) a.push(new ArrayBuffer(1 << 24));",
        "memory",
    ),
    // Recursion, Python's and the C stack's.
    (
        "run_python",
        "def f(n): return f(n + 1)\nf(0)",
        "RecursionError",
    ),
    (
        "run_python",
        "import json\njson.loads('[' * 100000 + ']' * 100000)",
        "stack limit",
    ),
    (
        "run_js",
        "function f(n) { return f(n + 1); } f(0)",
        "too much recursion",
    ),
    // Files outside the grants: absolute, `..`, symlinks out, writes to a read-only grant.
    (
        "run_python",
        "open('/etc/passwd').read()",
        "FileNotFoundError",
    ),
    (
        "run_python",
        "open('/project/../../etc/passwd').read()",
        "Error",
    ),
    ("run_python", "open('/project/passwd').read()", "Error"),
    ("run_python", "open('/project/secret').read()", "Error"),
    (
        "run_python",
        "open('/project/new.txt', 'w').write('x')",
        "Error",
    ),
    (
        "run_js",
        "fs.readFile('/etc/passwd')",
        "not in a granted directory",
    ),
    ("run_js", "fs.readFile('/project/passwd')", "FsError"),
    ("run_js", "fs.writeFile('/project/new.txt', 'x')", "denied"),
    // No threads, processes, native code or new host functions.
    (
        "run_python",
        "import threading\nthreading.Thread(target=print).start()",
        "RuntimeError",
    ),
    ("run_python", "import subprocess", "ModuleNotFoundError"),
    ("run_python", "import os\nos.fork()", "AttributeError"),
    ("run_python", "import ctypes", "ModuleNotFoundError"),
    ("run_js", "WebAssembly.Module", "ReferenceError"),
];

#[test]
fn hostile_code_meets_the_sandbox_limits_with_errors_naming_them() {
    let world = project(
        "",
        "fuel = 2_000_000_000\ntool_timeout_ms = 3_000\nmemory_mb = 96\n",
    );
    // Three at a time: the suite's other tests share the machine.
    let mut outcomes: Vec<(usize, String)> = Vec::new();
    let attacks: Vec<(usize, &(&str, &str, &str))> = ATTACKS.iter().enumerate().collect();
    for batch in attacks.chunks(3) {
        outcomes.extend(std::thread::scope(|scope| {
            let world = &world;
            let handles: Vec<_> = batch
                .iter()
                .map(|&(i, &(tool, code, _))| {
                    scope.spawn(move || match call(world, tool, code) {
                        Ok(result) => (i, result.to_string()),
                        Err(error) => (i, error),
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        }));
    }
    for (i, outcome) in outcomes {
        let (tool, code, expected) = ATTACKS[i];
        // Compute that never ends meets whichever bound comes first on a loaded
        // machine: its fuel or its wall time.
        let met = outcome.contains(expected)
            || (expected == "ran out of fuel" && outcome.contains("tool_timeout_ms"));
        assert!(met, "{tool} `{code}`: expected {expected:?} in\n{outcome}");
        assert!(
            !outcome.contains("root:x:0") && !outcome.contains("TOP SECRET"),
            "{tool} `{code}` read outside its grants:\n{outcome}"
        );
        assert!(
            !outcome.contains("\"error\"") || outcome.contains("\"traceback\""),
            "{outcome}"
        );
    }
    assert!(!world.path("data/new.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn no_network_env_or_host_state_reaches_the_code() {
    let (port, served) = crate::support::http_server("reached").await;
    let world = project("", "");
    let attacks = [
        (
            "run_python",
            format!("import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)"),
        ),
        (
            "run_js",
            format!("fetch('http://127.0.0.1:{port}/').then(() => 'reached')"),
        ),
        ("run_python", "import os\ndict(os.environ)".to_string()),
        ("run_python", "import sys\nsys.argv".to_string()),
    ];
    let results = tokio::task::spawn_blocking(move || {
        attacks
            .iter()
            .map(|(tool, code)| match call(&world, tool, code) {
                Ok(result) => result.to_string(),
                Err(error) => error,
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    assert!(results[0].contains("\"error\""), "{}", results[0]);
    assert!(
        !results[1].contains("\"value\":\"reached\""),
        "{}",
        results[1]
    );
    assert!(!results[2].contains("do-not-leak"), "{}", results[2]);
    assert!(results[2].contains("\"value\":{}"), "{}", results[2]);
    assert!(!results[3].contains("warren"), "{}", results[3]);
    assert_eq!(
        served.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "{results:?}"
    );
}

#[test]
fn every_call_starts_fresh_with_its_own_random_state() {
    let world = project("", "");
    let draw = |tool: &str, code: &str| call(&world, tool, code).unwrap()["value"].clone();
    let python = "import random, uuid\n[random.random(), str(uuid.uuid4())]";
    assert_ne!(draw("run_python", python), draw("run_python", python));
    assert_ne!(
        draw("run_js", "Math.random()"),
        draw("run_js", "Math.random()")
    );
    // What one call leaves behind, the next does not see.
    for (tool, set, get) in [
        (
            "run_python",
            "import builtins\nbuiltins.left = 1\nimport json\njson.left = 2",
            "import builtins, json\n[hasattr(builtins, 'left'), hasattr(json, 'left')]",
        ),
        (
            "run_js",
            "globalThis.left = 1; JSON.left = 2",
            "[typeof left, typeof JSON.left]",
        ),
    ] {
        call(&world, tool, set).unwrap();
        let seen = draw(tool, get);
        assert!(
            seen == json!([false, false]) || seen == json!(["undefined", "undefined"]),
            "{tool}: {seen}"
        );
    }
    // A last expression that is not JSON comes back as its repr; an exception with
    // its type, message and the model's line.
    let value = call(&world, "run_python", "{1, 2} | {3}").unwrap();
    assert_eq!(value["value"]["repr"], "{1, 2, 3}", "{value}");
    let raised = call(&world, "run_python", "x = 1\ny = x / 0").unwrap();
    assert_eq!(raised["error"]["type"], "ZeroDivisionError", "{raised}");
    let trace = raised["error"]["traceback"].as_str().unwrap();
    assert!(
        trace.contains("line 2") && trace.contains("y = x / 0"),
        "{trace}"
    );
    // An output flood is cut with a marker, and the call still answers.
    let flood = call(
        &world,
        "run_python",
        "for i in range(100000): print('flood', i)",
    )
    .unwrap();
    let stdout = flood["stdout"].as_str().unwrap();
    assert!(stdout.len() < 40 * 1024, "{}", stdout.len());
    assert!(
        stdout.contains("more characters cut"),
        "{}",
        &stdout[stdout.len() - 200..]
    );
    // Code past its bound is refused as invalid input naming the argument, unrun.
    for tool in ["run_python", "run_js"] {
        use std::io::Write as _;
        let huge = json!({ "code": "1;".repeat(600 * 1024) }).to_string();
        // Past what an argv holds: the arguments come on stdin (`-`).
        let mut child = Command::new(env!("CARGO_BIN_EXE_warren"))
            .args(["call", tool, "-"])
            .current_dir(world.dir.path())
            .env_remove("WARREN_CONFIG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(huge.as_bytes())
            .unwrap();
        let refused = text(&child.wait_with_output().unwrap().stderr);
        assert!(
            refused.contains("invalid input") && refused.contains("`code` must be a string"),
            "{tool}: {refused}"
        );
    }
    // A pure-Python package vendored into a granted directory imports from there.
    std::fs::create_dir_all(world.path("data/vendor/mypkg")).unwrap();
    std::fs::write(
        world.path("data/vendor/mypkg/__init__.py"),
        "def double(x):\n    return 2 * x\n",
    )
    .unwrap();
    let vendored = call(
        &world,
        "run_python",
        "import sys\nsys.path.insert(0, '/project/vendor')\nimport mypkg\nmypkg.double(21)",
    )
    .unwrap();
    assert_eq!(vendored["value"], 42, "{vendored}");
    // Standard input and files given by path.
    let output = warren(
        &world,
        &[
            "call",
            "run_python",
            &json!({"code": "import sys\n[sys.stdin.read().upper(), len(files['/project/sales.csv'].splitlines())]", "stdin": "abc", "files": ["/project/sales.csv"]}).to_string(),
        ],
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["value"], json!(["ABC", 4]), "{result}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_calls_in_one_reply_are_bounded_by_the_per_reply_cap() {
    let server = FakeLlm::start().await;
    let world = project(&model_table(&server.base_url), "");
    let calls: Vec<(&str, Value)> = (0..1000)
        .map(|i| ("run_js", json!({ "code": format!("{i} * 2") })))
        .collect();
    server.push(Reply::tool_calls(&calls, (10, 5)));
    server.push(Reply::answer("done", (10, 5)));
    let dir = world.dir.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_warren"))
            .args(["run", "-q", "--no-journal", "go"])
            .current_dir(dir)
            .env_remove("WARREN_CONFIG")
            .env("RUST_LOG", "warn")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(run.status.success(), "{}", text(&run.stderr));
    let requests = server.requests();
    let messages = requests[1].body["messages"].as_array().unwrap();
    let results: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(results.len(), 1000);
    let ran = results.iter().filter(|r| r.contains("\"value\"")).count();
    assert_eq!(ran, MAX_TOOL_CALLS_PER_REPLY);
    assert!(
        results[999].contains("MAX_TOOL_CALLS_PER_REPLY"),
        "{}",
        results[999]
    );
    assert!(results[7].contains("\"value\":14"), "{}", results[7]);
}

/// In one process, a caller's next instance is made ahead of its call: it must be as
/// fresh as any, and never serve a caller with other capabilities.
#[tokio::test(flavor = "multi_thread")]
async fn instances_made_ahead_are_fresh_and_never_cross_callers() {
    let world = project("", "");
    let (registry, config) = library(&world, warren::Sandbox::new().unwrap()).await;
    let main = warren::ToolAccess::new(config.profile("main").unwrap()).unwrap();
    let narrow = warren::ToolAccess::new(config.profile("narrow").unwrap()).unwrap();
    let probe = "import builtins, os, random\n[hasattr(builtins, 'left'), os.path.exists('/project/sales.csv'), random.random()]";
    let mut draws = Vec::new();
    for _ in 0..4 {
        let seen = value(&registry, &main, probe).await;
        assert_eq!(seen[0], false, "{seen}");
        assert_eq!(seen[1], true, "{seen}");
        draws.push(seen[2].clone());
        value(&registry, &main, "import builtins\nbuiltins.left = 1").await;
        // The background refill has time to finish, so the next call takes it.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    draws.dedup();
    assert_eq!(draws.len(), 4, "{draws:?}");
    // A caller with other capabilities never gets the instance made for `main`.
    let seen = value(&registry, &narrow, probe).await;
    assert_eq!(seen[1], false, "{seen}");
    let seen = value(&registry, &main, probe).await;
    assert_eq!(seen[1], true, "{seen}");
}

/// The project's config and its tools through the library, in `sandbox`.
async fn library(
    world: &World,
    sandbox: warren::Sandbox,
) -> (warren::ToolRegistry, warren::Config) {
    let config = warren::Config::load(&world.path("warren.toml")).unwrap();
    let registry = warren::ToolRegistry::for_config(std::sync::Arc::new(sandbox), &config)
        .await
        .unwrap();
    (registry, config)
}

/// `run_python` of `code` through the library, as `access`: its value.
async fn value(registry: &warren::ToolRegistry, access: &warren::ToolAccess, code: &str) -> Value {
    value_of(registry, access, "run_python", code).await
}

/// `tool` (`run_python` or `run_js`) of `code` through the library, as `access`: its
/// value.
async fn value_of(
    registry: &warren::ToolRegistry,
    access: &warren::ToolAccess,
    tool: &str,
    code: &str,
) -> Value {
    let arguments = json!({ "code": code }).to_string();
    let result = registry.call(access, tool, &arguments).await.unwrap();
    serde_json::from_str::<Value>(&result).unwrap()["value"].clone()
}

/// A caller's next instance finds the memory its last call touched still mapped: the
/// slot's reset copies every written page back in place instead of giving most of
/// them to the kernel (`sandbox/resident.rs`), so a call's path takes almost no page
/// faults (about 330 a `run_python` call before). The calls run on this test's own
/// thread (a current-thread runtime), whose faults are counted around each call.
#[tokio::test]
async fn a_callers_next_instance_finds_its_memory_resident() {
    let world = project("", "");
    let sandbox = warren::Sandbox::new().unwrap();
    if !sandbox.memory_slots().contains("reset in place") {
        panic!(
            "this test needs pooled memories reset in place (no swap active): {}",
            sandbox.memory_slots()
        );
    }
    let (registry, config) = library(&world, sandbox).await;
    let main = warren::ToolAccess::new(config.profile("main").unwrap()).unwrap();
    for (tool, code) in [
        ("run_python", "print(sum(range(1000)))"),
        (
            "run_js",
            "let s = 0; for (let i = 0; i < 1000; i++) s += i; console.log(s)",
        ),
    ] {
        let arguments = json!({ "code": code }).to_string();
        let mut faults = Vec::new();
        for _ in 0..8 {
            let before = thread_page_faults();
            let result = registry.call(&main, tool, &arguments).await.unwrap();
            faults.push(thread_page_faults() - before);
            assert!(result.contains("499500"), "{result}");
            // The refill (the spent store's reset, the next instance) runs meanwhile,
            // on this thread: with time to spare on a loaded machine, so that the next
            // call finds its instance made (else it would instantiate, and fault, on
            // its own path).
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
        // The first calls fault their working set in; from then on it stays.
        let settled = &faults[4..];
        assert!(
            settled.iter().all(|&f| f < 60),
            "{tool}: page faults per call {faults:?}"
        );
    }
}

/// What a call leaves anywhere in its memory is gone for the next one, however many
/// pages it wrote and wherever they are: the pages joined to keep a slot resident
/// are reset with the rest.
#[tokio::test]
async fn a_calls_scattered_writes_never_reach_the_next_call() {
    let world = project("", "");
    let (registry, config) = library(&world, warren::Sandbox::new().unwrap()).await;
    let main = warren::ToolAccess::new(config.profile("main").unwrap()).unwrap();
    let python = (
        "run_python",
        "import sys, random\nsys.modules['left'] = [bytes([random.randrange(1, 255)]) * random.randrange(64, 8192) for _ in range(2000)]\nlen(sys.modules['left'])",
        "import sys\n'left' in sys.modules",
        json!(false),
    );
    let js = (
        "run_js",
        "globalThis.left = Array.from({ length: 2000 }, (_, i) => 'x'.repeat(64 + (i * 37) % 4096)); left.length",
        "typeof globalThis.left",
        json!("undefined"),
    );
    for (tool, write, look, unseen) in [python, js] {
        for _ in 0..6 {
            assert_eq!(
                value_of(&registry, &main, tool, write).await,
                2000,
                "{tool}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            assert_eq!(
                value_of(&registry, &main, tool, look).await,
                unseen,
                "{tool}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

/// This thread's page faults so far (minor and major).
fn thread_page_faults() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    #[allow(unsafe_code)]
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr());
        usage.assume_init()
    };
    usage.ru_minflt + usage.ru_majflt
}
