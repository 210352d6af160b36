//! Hostile journals as files, through the binary: a crash's cut inside a character,
//! a symlinked journal and a file that is no journal given to `warren resume`,
//! journals readable by other users, a run planted by another user, and journals huge
//! or sparse enough to take a reader's memory. Each is refused or read within its
//! bounds, saying what is wrong, and nothing is changed before it is known to be a
//! journal of the user's own.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fake_llm::{FakeLlm, Reply};
use crate::support::{cache_dir, text, warren, World};

/// A project with one model (`base_url`) and no plugin files: reading journals back
/// needs no plugin.
pub(crate) fn project(base_url: &str) -> World {
    let world = World::new();
    std::fs::write(
        world.path("warren.toml"),
        format!(
            r#"
[plugins]
cache_dir = {:?}

[models.fake]
provider = "openai"
base_url = "{base_url}"
model = "fake-model"
api_key_env = "CARGO_PKG_NAME"
stream = false
max_retries = 0
price = {{ input_per_mtok = 1.0, output_per_mtok = 1.0 }}

[profiles.main]
tools = []
"#,
            cache_dir()
        ),
    )
    .unwrap();
    world
}

/// `run_started` of run `run` at `ts_ms`.
pub(crate) fn started(run: &str, ts_ms: u64) -> String {
    json!({"ts_ms": ts_ms, "type": "run_started", "v": 2, "run": run, "task": "t",
        "profile": "main", "warren": "0", "config": "warren.toml", "config_sha256": "00"})
    .to_string()
}

/// `agent_queued` of `agent` under `parent`.
pub(crate) fn queued(agent: &str, parent: Option<&str>) -> String {
    json!({"ts_ms": 2, "type": "agent_queued", "agent": agent, "parent": parent,
        "profile": "main", "task": "t"})
    .to_string()
}

/// `agent_finished` of `agent`, ok, with `text` and `cost_usd`.
pub(crate) fn finished(agent: &str, text: &str, cost_usd: f64) -> String {
    json!({"ts_ms": 3, "type": "agent_finished", "agent": agent, "state": "ok",
        "text": text, "turns": 1, "input_tokens": 10, "output_tokens": 5,
        "cost_usd": cost_usd, "duration_ms": 5})
    .to_string()
}

/// Writes run `id`'s journal (`lines`, each ended) in the world's journal directory.
pub(crate) fn journal(world: &World, id: &str, lines: &[String]) -> PathBuf {
    let dir = world.path(&format!(".warren/runs/{id}"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("journal.jsonl");
    std::fs::write(
        &path,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    path
}

/// `warren ARGS` in `world`, killed when its resident memory passes `max_rss_kb` or
/// it runs past `limit`: its output, its peak RSS (sampled every 5 ms), and whether
/// it was killed.
pub(crate) fn bounded(
    world: &World,
    args: &[&str],
    max_rss_kb: u64,
    limit: Duration,
) -> (Output, u64, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(args)
        .current_dir(world.dir.path())
        .env_remove("WARREN_CONFIG")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status_path = format!("/proc/{}/status", child.id());
    let (start, mut peak, mut killed) = (Instant::now(), 0, false);
    while child.try_wait().unwrap().is_none() {
        let rss = std::fs::read_to_string(&status_path)
            .ok()
            .and_then(|status| {
                let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .unwrap_or(0);
        peak = peak.max(rss);
        if !killed && (peak > max_rss_kb || start.elapsed() > limit) {
            killed = true;
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    (child.wait_with_output().unwrap(), peak, killed)
}

fn json_of(output: &Output) -> Value {
    assert!(output.status.success(), "{}", text(&output.stderr));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&output.stdout)))
}

#[test]
fn a_crash_cut_inside_a_character_leaves_the_run_readable() {
    let world = project("http://127.0.0.1:9");
    let path = journal(&world, "r1", &[started("r1", 1), queued("a", None)]);
    // The last write, cut by the crash inside `é`.
    let mut bytes = std::fs::read(&path).unwrap();
    let torn = finished("a", "café", 0.1);
    bytes.extend_from_slice(&torn.as_bytes()[..torn.find('é').unwrap() + 1]);
    std::fs::write(&path, bytes).unwrap();

    let shown = json_of(&warren(&world, &["show", "r1", "--json"]));
    assert_eq!(shown["agents"][0]["state"], "interrupted", "{shown}");
    let listed = json_of(&warren(&world, &["runs", "--json"]));
    assert_eq!(listed["runs"][0]["run_id"], "r1", "{listed}");
    assert_eq!(listed["runs"][0]["agents"], 1, "{listed}");
    // A line that is not UTF-8 before the last is an error naming it.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"\n");
    bytes.extend_from_slice(finished("a", "x", 0.1).as_bytes());
    std::fs::write(&path, bytes).unwrap();
    let out = warren(&world, &["show", "r1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("journal.jsonl:3: not UTF-8"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn resume_never_follows_a_symlink_nor_changes_a_file_that_is_no_journal() {
    let world = project("http://127.0.0.1:9");
    let victim = world.path("victim.txt");
    std::fs::write(&victim, "precious\nno newline after this").unwrap();
    let linked = world.path(".warren/runs/linked");
    std::fs::create_dir_all(&linked).unwrap();
    std::os::unix::fs::symlink(&victim, linked.join("journal.jsonl")).unwrap();
    let out = warren(&world, &["resume", "linked"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("is a symlink"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\nno newline after this"
    );

    let junk = world.path(".warren/runs/junk");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("journal.jsonl"), "not a journal\nhalf a line").unwrap();
    let out = warren(&world, &["resume", "junk"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not a journal record"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(junk.join("journal.jsonl")).unwrap(),
        "not a journal\nhalf a line"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn journals_are_readable_by_their_owner_only() {
    let server = FakeLlm::start().await;
    server.route("SECRET-TASK", Reply::answer("done", (10, 5)));
    let world = project(&server.base_url);
    let out = warren(&world, &["run", "-q", "--run-id", "r1", "SECRET-TASK"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for (path, mode) in [
        (".warren", 0o700),
        (".warren/runs", 0o700),
        (".warren/runs/r1", 0o700),
        (".warren/runs/r1/journal.jsonl", 0o600),
    ] {
        let found = std::fs::metadata(world.path(path))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(found, mode, "{path} is {found:o}");
    }
}

#[test]
fn a_run_another_user_owns_is_not_resumed_and_is_shown_with_a_warning() {
    let world = project("http://127.0.0.1:9");
    let path = journal(
        &world,
        "planted",
        &[started("planted", 1), queued("a", None)],
    );
    let give = |path: &std::path::Path| {
        std::os::unix::fs::chown(path, Some(65534), Some(65534))
            .expect("giving a file to uid 65534 needs root: the suite runs as root")
    };
    give(&path);
    give(path.parent().unwrap());

    let out = warren(&world, &["resume", "last"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(
        said.contains("planted/journal.jsonl is owned by uid 65534"),
        "{said}"
    );
    let out = warren(&world, &["show", "last"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("is owned by uid 65534, not by you"),
        "{}",
        text(&out.stderr)
    );

    // A run directory another user owns, holding a journal of the user's own.
    let path = journal(&world, "hosted", &[started("hosted", 2), queued("a", None)]);
    give(path.parent().unwrap());
    let out = warren(&world, &["resume", "hosted"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("runs/hosted is owned by uid 65534"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn huge_and_sparse_journals_are_read_within_bounds() {
    let world = project("http://127.0.0.1:9");
    journal(
        &world,
        "small",
        &[
            started("small", 1),
            queued("a", None),
            finished("a", "ok", 0.1),
        ],
    );
    // 500 MiB: a head, 500 MiB of one line of zeros (sparse), and its end.
    let big = journal(&world, "big", &[started("big", 2)]);
    let file = std::fs::OpenOptions::new().append(true).open(&big).unwrap();
    file.set_len(500 << 20).unwrap();
    std::fs::write(
        world.path("end.jsonl"),
        "\n{\"ts_ms\":9,\"type\":\"run_finished\",\"state\":\"ok\",\"cost_usd\":0.5}\n",
    )
    .unwrap();
    use std::io::Write as _;
    (&file)
        .write_all(&std::fs::read(world.path("end.jsonl")).unwrap())
        .unwrap();
    // 16 GiB, sparse: no line end anywhere.
    let sparse = world.path(".warren/runs/sparse");
    std::fs::create_dir_all(&sparse).unwrap();
    std::fs::File::create(sparse.join("journal.jsonl"))
        .unwrap()
        .set_len(16 << 30)
        .unwrap();

    let max_rss_kb = 200 * 1024;
    let (out, peak, killed) = bounded(
        &world,
        &["runs", "--json"],
        max_rss_kb,
        Duration::from_secs(120),
    );
    assert!(
        !killed,
        "warren runs passed {max_rss_kb} KiB (peak {peak} KiB)"
    );
    let listed = json_of(&out);
    let ids: Vec<&str> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["big", "small"], "{listed}");
    assert_eq!(listed["runs"][0]["state"], "ok", "{listed}");
    assert_eq!(listed["runs"][0]["agents"], Value::Null, "{listed}");
    assert!(
        text(&out.stderr).contains("sparse/journal.jsonl:1: a line longer than"),
        "{}",
        text(&out.stderr)
    );

    // Reading whole, a line is held up to its bound (128 MiB) before it is refused.
    let max_rss_kb = 320 * 1024;
    for args in [
        &["show", "sparse"][..],
        &["show", "big"],
        &["diff", "small", "sparse"],
    ] {
        let (out, peak, killed) = bounded(&world, args, max_rss_kb, Duration::from_secs(120));
        assert!(
            !killed,
            "warren {args:?} passed {max_rss_kb} KiB (peak {peak} KiB)"
        );
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}",
            text(&out.stderr)
        );
        let said = text(&out.stderr);
        assert!(
            said.contains("bytes") && said.contains("journal.jsonl"),
            "{args:?}: {said}"
        );
    }
    let (out, peak, killed) = bounded(
        &world,
        &["replay", "--all", ".warren/runs"],
        1 << 20,
        Duration::from_secs(300),
    );
    assert!(
        !killed,
        "warren replay --all passed 1 GiB (peak {peak} KiB)"
    );
    assert!(
        text(&out.stdout).contains("ERROR    sparse: ")
            && text(&out.stdout).contains("17179869184 bytes"),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}
