//! Plugins written in other languages, built from source in this repository, called
//! through `warren call` and through an agent run with a scripted model.

use std::process::Command;

use warren::Event;
use warren::{AgentState, Config, Host};

use crate::support::{cache_dir, World};

fn python_world() -> (World, std::path::PathBuf) {
    let world = World::new();
    std::fs::create_dir(world.path("data")).unwrap();
    std::fs::write(
        world.path("data/sales.csv"),
        "region,units,price\nnorth,10,2.5\nsouth,,3\nnorth,7,2\n",
    )
    .unwrap();
    let plugin = crate::guests::python_plugin();
    let config = world.path("warren.toml");
    std::fs::write(
        &config,
        format!(
            "[plugins]\nfiles = [{plugin:?}]\ncache_dir = {:?}\n\n[models.scripted]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\n\
             [profiles.main]\ntools = [\"csv_summary\", \"text_stats\"]\n[profiles.main.capabilities]\nfs = [{{ host = \"data\", guest = \"/data\" }}]\nmemory_mb = 256\n",
            cache_dir()
        ),
    )
    .unwrap();
    (world, config)
}

const SUMMARY: &str = "/data/sales.csv: 3 rows, 3 columns\n- region: 3 values, 0 empty, most common: north (2), south (1)\n\
- units: 2 values, 1 empty, min 7, max 10, mean 8.5\n- price: 3 values, 0 empty, min 2, max 3, mean 2.5";

#[test]
fn python_plugin_through_warren_call() {
    let (world, config) = python_world();
    let call = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_warren"))
            .arg("--config")
            .arg(&config)
            .args(args)
            .output()
            .unwrap()
    };
    let output = call(&["call", "csv_summary", r#"{"path":"/data/sales.csv"}"#]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim_end(), SUMMARY);
    let output = call(&["call", "text_stats", r#"{"text":"the fox and the dog"}"#]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim_end(),
        "1 lines, 5 words, 19 characters; most frequent: the (2), fox (1), and (1), dog (1)"
    );
    // Outside the granted directory, and bad input.
    std::fs::write(world.path("secret.csv"), "a\n1\n").unwrap();
    let output = call(&[
        "call",
        "csv_summary",
        &format!(r#"{{"path":"{}"}}"#, world.path("secret.csv").display()),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("no such file"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = call(&["call", "csv_summary", r#"{"path": 5}"#]);
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("invalid input for csv_summary: `path` must be a non-empty string"));
}

#[tokio::test]
async fn python_plugin_in_an_agent_run() {
    let (world, config) = python_world();
    std::fs::write(
        world.path("script.toml"),
        "[[turns]]\ntool_calls = [{ name = \"csv_summary\", arguments = { path = \"/data/sales.csv\" } }]\n\n\
         [[turns]]\nwhen = \"3 rows\"\ntext = \"Three sales rows.\"\n",
    )
    .unwrap();
    let host = Host::load(Config::load(&config).unwrap()).await.unwrap();
    let run = host.start("main", "Summarise the sales.", None).unwrap();
    let mut events = run.events();
    let report = run.wait().await;
    assert_eq!(report.root.state, AgentState::Ok, "{:?}", report.root);
    assert_eq!(report.root.text, "Three sales rows.");
    let mut finished = None;
    while let Ok(Some(record)) =
        tokio::time::timeout(std::time::Duration::from_millis(100), events.next()).await
    {
        if let Event::ToolCallFinished {
            tool,
            outcome,
            summary,
            ..
        } = record.event
        {
            finished = Some((tool, outcome, summary));
        }
    }
    let (tool, outcome, summary) = finished.unwrap();
    assert_eq!(
        (tool.as_str(), outcome),
        ("csv_summary", warren::ToolOutcome::Ok)
    );
    assert!(summary.starts_with("/data/sales.csv: 3 rows"), "{summary}");
}

// Multi-threaded: the test blocks on `warren` processes while its HTTP server answers.
#[tokio::test(flavor = "multi_thread")]
async fn javascript_plugin_through_warren_call_and_an_agent_run() {
    let world = World::new();
    let plugin = crate::guests::js_plugin();
    let (port, _) =
        crate::support::http_server("<html><body><h1>News</h1><p>fox &amp; dog</p></body></html>")
            .await;
    let config = world.path("warren.toml");
    std::fs::write(
        &config,
        format!(
            "[plugins]\nfiles = [{plugin:?}]\ncache_dir = {:?}\n\n[models.scripted]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\n\
             [profiles.main.capabilities]\nnet = [\"127.0.0.1:{port}\"]\n[profiles.offline]\n",
            cache_dir()
        ),
    )
    .unwrap();
    // fetch_text goes through wasi:http, so the profile's net allow-list decides.
    let fetch = |profile: &str| {
        Command::new(env!("CARGO_BIN_EXE_warren"))
            .arg("--config")
            .arg(&config)
            .args([
                "call",
                "fetch_text",
                &format!(r#"{{"url":"http://127.0.0.1:{port}/"}}"#),
                "--profile",
                profile,
            ])
            .output()
            .unwrap()
    };
    let output = fetch("main");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim_end(),
        "News\n\nfox & dog"
    );
    let output = fetch("offline");
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("fetch_text was denied network access (wasi:http/"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = Command::new(env!("CARGO_BIN_EXE_warren"))
        .arg("--config")
        .arg(&config)
        .args([
            "call",
            "html_to_text",
            r#"{"html":"<p>Hello &amp; <b>world</b></p><script>x()</script><ul><li>a</li></ul>"}"#,
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim_end(),
        "Hello & world\n\n• a"
    );
    let output = Command::new(env!("CARGO_BIN_EXE_warren"))
        .arg("--config")
        .arg(&config)
        .args(["call", "markdown_to_text", "{}"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("invalid input for markdown_to_text: `markdown` must be a string"));

    std::fs::write(
        world.path("script.toml"),
        "[[turns]]\ntool_calls = [{ name = \"markdown_to_text\", arguments = { markdown = \"# Hi\\n\\n**bold** [x](https://x.org)\" } }]\n\n\
         [[turns]]\nwhen = \"bold x (https://x.org)\"\ntext = \"converted\"\n",
    )
    .unwrap();
    let host = Host::load(Config::load(&config).unwrap()).await.unwrap();
    let report = host.start("main", "Convert.", None).unwrap().wait().await;
    assert_eq!(report.root.text, "converted", "{:?}", report.root);
}

/// `warren plugin new` for each language, then the scaffold's own test (which builds
/// it and calls its tool through the same `warren` binary).
#[test]
fn scaffolded_plugins_build_and_pass_their_own_test() {
    crate::support::guests(); // makes sure the wasm32-wasip2 target is there
    let dir = tempfile::tempdir().unwrap();
    let warren = env!("CARGO_BIN_EXE_warren");
    for lang in ["rust", "python", "js"] {
        let name = format!("hello-{lang}");
        let output = Command::new(warren)
            .args(["plugin", "new", &name, "--lang", lang, "--dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let tool = format!("{}_greet", name.replace('-', "_"));
        assert!(
            String::from_utf8_lossy(&output.stdout).contains(&format!("calls its `{tool}` tool")),
            "{}",
            String::from_utf8_lossy(&output.stdout)
        );
        let root = dir.path().join(&name);
        assert!(root.join("wit/plugin.wit").is_file() && root.join("test.sh").is_file());
        let mut test = Command::new(root.join("test.sh"));
        if lang == "python" {
            // As on Debian 12 or recent Ubuntu: the system's python3, whose pip refuses
            // to install outside a virtual environment.
            test.env("PATH", "/usr/bin:/bin")
                .env("PIP_REQUIRE_VIRTUALENV", "1");
        }
        let output = test
            .env("WARREN", warren)
            .env(
                "CARGO_TARGET_DIR",
                crate::support::root().join("target/wasm"),
            )
            .env("XDG_CACHE_HOME", cache_dir())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{lang} scaffold test failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(String::from_utf8_lossy(&output.stdout)
            .contains(&format!("ok: {name} works under warren")));
    }
    // Each example tool is named after its plugin, so the three load side by side.
    let config = dir.path().join("warren.toml");
    std::fs::write(
        &config,
        format!(
            "[plugins]\nfiles = [\"hello-rust/hello-rust.wasm\", \"hello-python/hello-python.wasm\", \"hello-js/hello-js.wasm\"]\nbuiltins = false\ncache_dir = {:?}\n",
            cache_dir()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let output = Command::new(warren)
        .args(["--config", config, "tools", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let tools: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["hello_js_greet", "hello_python_greet", "hello_rust_greet"]
    );
    for tool in names {
        let output = Command::new(warren)
            .args(["--config", config, "call", tool, r#"{"name":"Ada"}"#])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "Hello, Ada!\n",
            "{tool}"
        );
    }
    let output = Command::new(warren)
        .args(["plugin", "new", "hello-rust", "--lang", "rust", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("already exists"));
    let output = Command::new(warren)
        .args(["plugin", "new", "Bad Name", "--lang", "js"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("plugin name `Bad Name` must start with a lower-case letter"));
}

#[tokio::test]
async fn c_plugin_through_warren_call_and_an_agent_run() {
    let world = World::new();
    std::fs::create_dir(world.path("data")).unwrap();
    std::fs::write(world.path("data/a.txt"), "hello world").unwrap();
    let plugin = crate::guests::c_plugin(env!("CARGO_BIN_EXE_warren"));
    let config = world.path("warren.toml");
    std::fs::write(
        &config,
        format!(
            "[plugins]\nfiles = [{plugin:?}]\ncache_dir = {:?}\n\n[models.scripted]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\n\
             [profiles.main.capabilities]\nfs = [{{ host = \"data\", guest = \"/data\" }}]\n",
            cache_dir()
        ),
    )
    .unwrap();
    let call = |args: &str| {
        Command::new(env!("CARGO_BIN_EXE_warren"))
            .arg("--config")
            .arg(&config)
            .args(["call", "checksum", args])
            .output()
            .unwrap()
    };
    // Known values: zlib.crc32 / zlib.adler32 of b"hello world".
    let output = call(r#"{"path":"/data/a.txt"}"#);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim_end(),
        "crc32 0d4a1185  11 bytes  /data/a.txt"
    );
    let output = call(r#"{"path":"/data/a.txt","algorithm":"adler32"}"#);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim_end(),
        "adler32 1a0b045d  11 bytes  /data/a.txt"
    );
    let output = call(r#"{"path":"/data/../secret.txt"}"#);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("checksum failed: denied"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = call(r#"{"path":"/data/a.txt","algorithm":"md5"}"#);
    assert!(String::from_utf8_lossy(&output.stderr).contains("invalid input for checksum"));

    std::fs::write(
        world.path("script.toml"),
        "[[turns]]\ntool_calls = [{ name = \"checksum\", arguments = { path = \"/data/a.txt\", algorithm = \"fnv1a64\" } }]\n\n\
         [[turns]]\nwhen = \"fnv1a64 779a65e7023cd2e7\"\ntext = \"checked\"\n",
    )
    .unwrap();
    let host = Host::load(Config::load(&config).unwrap()).await.unwrap();
    let report = host
        .start("main", "Checksum a.txt.", None)
        .unwrap()
        .wait()
        .await;
    assert_eq!(report.root.text, "checked", "{:?}", report.root);
}

#[test]
fn installing_the_npm_projects_changes_no_tracked_file() {
    // Each tracked npm project, installed from a copy the way the builds and tests
    // install it: the install succeeds from the lock file alone and leaves it as it
    // was (`npm install` rewrote incomplete lock files on every fresh clone).
    for project in [
        "plugins/js-markdown",
        "tests/fixtures/typed-js",
        "tests/fixtures/bullmq-client",
        "tests/fixtures/mcp-inspector",
    ] {
        let source = crate::support::root().join(project);
        let copy = tempfile::tempdir().unwrap();
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(source.join(file), copy.path().join(file)).unwrap();
        }
        let lock = std::fs::read(source.join("package-lock.json")).unwrap();
        crate::guests::npm_ci(copy.path(), "the npm projects need Node.js and npm");
        assert!(
            std::fs::read(copy.path().join("package-lock.json")).unwrap() == lock,
            "installing {project} rewrote its package-lock.json"
        );
    }
}
