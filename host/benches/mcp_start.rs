//! How soon `warren mcp` is ready: from process start to the answer to `tools/list`
//! (after `initialize`), and to the answer to a first `read_file` call, with an empty
//! compile cache (cold: the built-ins compile in the background, the call waits for
//! `files`) and with the cache filled by the run before (warm). Target: `tools/list`
//! within 100 ms either way (issue 33).
//!
//! Run with: `cargo bench --bench mcp_start`

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts per case; the median is printed.
const RUNS: usize = 5;

/// One start of `warren mcp` in `dir`: (until `tools/list` is answered, until a first
/// `read_file` call is).
fn start(dir: &std::path::Path) -> anyhow::Result<(Duration, Duration)> {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(["mcp", "--config"])
        .arg(dir.join("warren.toml"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut answer = |id: u64| -> anyhow::Result<()> {
        loop {
            let line = stdout
                .next()
                .ok_or_else(|| anyhow::anyhow!("warren mcp exited"))??;
            let message: serde_json::Value = serde_json::from_str(&line)?;
            if message["id"] == id {
                anyhow::ensure!(message.get("error").is_none(), "{line}");
                return Ok(());
            }
        }
    };
    for message in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    ] {
        writeln!(stdin, "{message}")?;
    }
    answer(1)?;
    answer(2)?;
    let listed = started.elapsed();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"/docs/a.md"}}}}}}"#
    )?;
    answer(3)?;
    let called = started.elapsed();
    drop(stdin);
    child.wait()?;
    Ok((listed, called))
}

fn median(mut values: Vec<Duration>) -> f64 {
    values.sort();
    values[values.len() / 2].as_secs_f64() * 1000.0
}

fn main() -> anyhow::Result<()> {
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("docs"))?;
        std::fs::write(dir.path().join("docs/a.md"), "hello\n")?;
        std::fs::write(
            dir.path().join("warren.toml"),
            "[plugins]\ncache_dir = \"cache\"\n\n[profiles.main.capabilities]\nfs = [{ host = \"docs\", guest = \"/docs\" }]\n",
        )?;
        cold.push(start(dir.path())?);
        warm.push(start(dir.path())?);
    }
    for (case, runs) in [("cold", cold), ("warm", warm)] {
        let (listed, called): (Vec<_>, Vec<_>) = runs.into_iter().unzip();
        println!(
            "{case} cache: tools/list answered {:>8.1} ms   first read_file answered {:>8.1} ms   (median of {RUNS})",
            median(listed),
            median(called)
        );
    }
    Ok(())
}
