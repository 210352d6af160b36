//! Hostile journals as data, through the binary: agents whose parents form a cycle, a
//! chain of 60,000 agents, a negative recorded cost, a run id that names another
//! directory, a time past JavaScript's dates, escape sequences in model text, and
//! answers too large to diff. Each is refused as unreadable or shown bounded and
//! escaped, naming what is wrong.

use std::time::Duration;

use serde_json::{json, Value};

use crate::journal_files::{bounded, finished, journal, project, queued, started};
use crate::support::{text, warren};

/// Half a minute: what a refusal or a bounded diff needs many times over (a cycle
/// looped forever, a 150,000-line diff did not finish).
const PATIENCE: Duration = Duration::from_secs(30);

#[test]
fn a_cyclic_or_too_deep_tree_is_refused_naming_the_line() {
    let world = project("http://127.0.0.1:9");
    journal(&world, "fine", &[started("fine", 1), queued("a", None)]);
    journal(
        &world,
        "cycle",
        &[
            started("cycle", 1),
            queued("a", None),
            queued("b", Some("c")),
            queued("c", Some("b")),
        ],
    );
    journal(
        &world,
        "selfish",
        &[started("selfish", 1), queued("a", Some("a"))],
    );
    let mut chain = vec![started("chain", 1), queued("n0", None)];
    chain.extend((1..60_000).map(|n| queued(&format!("n{n}"), Some(&format!("n{}", n - 1)))));
    journal(&world, "chain", &chain);

    for (args, said) in [
        (&["diff", "fine", "cycle"][..], "journal.jsonl:3: an unreadable record: agent `b`'s parent `c` was not queued before it"),
        (&["show", "selfish"], "journal.jsonl:2: an unreadable record: agent `a` is recorded as its own parent"),
        (&["show", "chain"], "journal.jsonl:19: an unreadable record: agent `n17` is 17 levels deep"),
        (&["diff", "chain", "fine"], "agent `n17` is 17 levels deep"),
    ] {
        let (out, peak, killed) = bounded(&world, args, 300 * 1024, PATIENCE);
        assert!(!killed, "warren {args:?}: killed (peak {peak} KiB)");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(said), "{args:?}: {}", text(&out.stderr));
    }
}

#[test]
fn a_negative_or_endless_recorded_cost_makes_the_record_unreadable() {
    let world = project("http://127.0.0.1:9");
    let response = json!({"ts_ms": 3, "type": "model_response", "agent": "a", "turn": 1,
        "request_messages": 1, "text": "", "finish": "stop", "input_tokens": 1,
        "output_tokens": 1, "cost_usd": -1000.0});
    journal(
        &world,
        "refund",
        &[
            started("refund", 1),
            queued("a", None),
            response.to_string(),
        ],
    );
    for args in [&["resume", "refund"][..], &["show", "refund"]] {
        let out = warren(&world, args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains("journal.jsonl:3: an unreadable record: a recorded cost_usd of -1000 is not a figure warren records"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let budget = started("budget", 1).replace(
        "\"v\":2",
        "\"v\":2,\"limits\":{\"budget_usd\":-5.0,\"max_concurrent\":1,\"max_depth\":1}",
    );
    journal(&world, "budget", &[budget, queued("a", None)]);
    let out = warren(&world, &["show", "budget"]);
    assert!(
        text(&out.stderr).contains("budget_usd of -5"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_recorded_run_id_that_is_a_path_is_refused() {
    let world = project("http://127.0.0.1:9");
    let elsewhere = world.path("elsewhere/r1");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(
        elsewhere.join("journal.jsonl"),
        format!("{}\n", started("r1", 1)),
    )
    .unwrap();
    journal(
        &world,
        "r1",
        &[started("../../../elsewhere/r1", 1), queued("a", None)],
    );
    for args in [&["resume", "r1"][..], &["show", "r1"]] {
        let out = warren(&world, args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(
                "journal.jsonl:1: an unreadable record: `../../../elsewhere/r1` is not a run id"
            ),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_time_past_javascripts_dates_reads_as_invalid_alone() {
    let world = project("http://127.0.0.1:9");
    journal(
        &world,
        "now",
        &[started("now", 1_795_999_999_000), queued("a", None)],
    );
    journal(
        &world,
        "future",
        &[started("future", 9_000_000_000_000_000), queued("a", None)],
    );
    let out = warren(&world, &["runs", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let times: Vec<(&str, &str)> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["run_id"].as_str().unwrap(),
                r["started_utc"].as_str().unwrap_or("absent"),
            )
        })
        .collect();
    assert_eq!(
        times,
        [("future", "invalid time"), ("now", "2026-11-30 00:53:19")],
        "{listed}"
    );
    let table = text(&warren(&world, &["runs"]).stdout);
    assert!(
        table.contains("invalid time") && table.contains("2026-11-30 00:53:19"),
        "{table}"
    );
    // The page lists both, in a browser, and throws nothing.
    let served = crate::browser::Served::start(world.dir.path(), &["view"]);
    crate::browser::browse("dated", &served.url, "web-view-dated-runs.png", |_| {});
}

#[test]
fn escape_sequences_in_model_text_are_shown_escaped_in_every_report() {
    let world = project("http://127.0.0.1:9");
    let hostile = "copied\u{1b}]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u{7}\u{1b}[2J\u{9b}31m";
    let response = json!({"ts_ms": 3, "type": "model_response", "agent": "a", "turn": 1,
        "request_messages": 1, "text": hostile, "finish": "stop", "input_tokens": 1,
        "output_tokens": 1, "cost_usd": 0.1});
    journal(
        &world,
        "r1",
        &[
            started("r1", 1),
            queued("a", None),
            response.to_string(),
            finished("a", hostile, 0.1),
        ],
    );
    journal(
        &world,
        "r2",
        &[
            started("r2", 2),
            queued("a", None),
            finished("a", "calm", 0.1),
        ],
    );
    for args in [
        &["show", "r1"][..],
        &["show", "r1", "--agent", "a"],
        &["diff", "r1", "r2"],
    ] {
        let out = warren(&world, args);
        assert!(out.status.code().is_some(), "{args:?}");
        let shown = text(&out.stdout);
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}') && !shown.contains('\u{9b}'),
            "{args:?} printed a raw control character: {shown:?}"
        );
        assert!(shown.contains("copied\\x1b]52;c;"), "{args:?}: {shown}");
    }
}

#[test]
fn a_diff_of_huge_answers_is_bounded_and_says_where_they_first_differ() {
    let world = project("http://127.0.0.1:9");
    let lines = |tag: &str, n: usize| (0..n).map(|i| format!("{tag} {i}\n")).collect::<String>();
    // 150,000 lines each, every one different, over the diff's size bound.
    let (was, now) = (lines("line", 150_000), lines("LINE", 150_000));
    journal(
        &world,
        "long1",
        &[
            started("long1", 1),
            queued("a", None),
            finished("a", &was, 0.1),
        ],
    );
    journal(
        &world,
        "long2",
        &[
            started("long2", 2),
            queued("a", None),
            finished("a", &now, 0.1),
        ],
    );
    // 0.9 MB each, every line different: within the size bound, past the deadline.
    let (was, now) = (lines("old", 70_000), lines("new", 70_000));
    journal(
        &world,
        "wide1",
        &[
            started("wide1", 3),
            queued("a", None),
            finished("a", &was, 0.1),
        ],
    );
    journal(
        &world,
        "wide2",
        &[
            started("wide2", 4),
            queued("a", None),
            finished("a", &now, 0.1),
        ],
    );

    for (pair, said) in [
        (
            ["long1", "long2"],
            "first difference, at line 1:\n-line 0\n+LINE 0",
        ),
        (
            ["wide1", "wide2"],
            "first difference, at line 1:\n-old 0\n+new 0",
        ),
    ] {
        let (out, peak, killed) = bounded(&world, &["diff", pair[0], pair[1]], 1 << 20, PATIENCE);
        assert!(
            !killed,
            "warren diff {pair:?} did not end (peak {peak} KiB)"
        );
        let shown = text(&out.stdout);
        assert!(
            shown.contains(said),
            "{pair:?}: {}",
            &shown[..shown.len().min(4000)]
        );
        assert!(
            shown.lines().count() < 600,
            "{pair:?}: {} lines",
            shown.lines().count()
        );
    }
}
