//! `read_file` (numbered windows and caps) and `edit_file` (single, list, refusals).

use serde_json::{json, Value};
use warren::ToolCallError;

use super::{assert_invalid, call, file, READER};
use crate::support::World;

#[tokio::test]
async fn read_file_numbers_lines_in_a_window_and_cuts_long_files() {
    let world = World::new();
    let long: String = (1..=2500).map(|n| format!("line {n}\n")).collect();
    file(&world, "docs/long.txt", &long, 0);
    let wide: String = (1..=1000)
        .map(|_| format!("{}\n", "x".repeat(299)))
        .collect();
    file(&world, "docs/wide.txt", &wide, 0);
    let (registry, access) = world.load(READER, "main").await;
    let read = |args: Value| call(&registry, &access, "read_file", args);

    assert_eq!(
        read(json!({"path": "/docs/notes.md", "line_numbers": false}))
            .await
            .unwrap(),
        "alpha\nthe quick brown fox\nomega\n",
        "raw text unless numbering is asked for"
    );
    assert_eq!(
        read(json!({"path": "/docs/notes.md", "line_numbers": true}))
            .await
            .unwrap(),
        "     1\talpha\n     2\tthe quick brown fox\n     3\tomega"
    );
    assert_eq!(
        read(json!({"path": "/docs/notes.md", "offset": 2, "limit": 1}))
            .await
            .unwrap(),
        "     2\tthe quick brown fox"
    );
    assert_eq!(
        read(json!({"path": "/docs/notes.md", "offset": 3}))
            .await
            .unwrap(),
        "     3\tomega"
    );

    let first = read(json!({"path": "/docs/long.txt", "line_numbers": true}))
        .await
        .unwrap();
    let lines: Vec<&str> = first.lines().collect();
    assert_eq!(lines.len(), 2001);
    assert_eq!(lines[1999], "  2000\tline 2000");
    assert_eq!(
        lines[2000],
        "[cut: showing lines 1-2000 of 2500; use offset=2001 to read on]"
    );
    let rest = read(json!({"path": "/docs/long.txt", "offset": 2001}))
        .await
        .unwrap();
    assert_eq!(rest.lines().count(), 500);
    assert!(rest.ends_with("  2500\tline 2500"), "no note at the end");

    let cut = read(json!({"path": "/docs/wide.txt", "limit": 1000}))
        .await
        .unwrap();
    let note = cut.lines().last().unwrap();
    assert!(cut.len() < 256 * 1024 + 100, "{}", cut.len());
    assert!(
        note == "[cut: showing lines 1-853 of 1000; use offset=854 to read on]",
        "{note}"
    );

    assert_invalid(
        read(json!({"path": "/docs/notes.md", "offset": 4})).await,
        "offset 4 is past the end: /docs/notes.md has 3 lines",
    );
    assert_invalid(
        read(json!({"path": "/docs/notes.md", "offset": 0})).await,
        "1-based",
    );
}

#[tokio::test]
async fn edit_file_replaces_exactly_what_it_is_told() {
    let world = World::new();
    file(
        &world,
        "out/a.md",
        "one fish\ntwo fish\nred fish\nblue\n",
        0,
    );
    let (registry, access) = world.load(READER, "main").await;
    let edit = |args: Value| call(&registry, &access, "edit_file", args);
    let on_disk = || std::fs::read_to_string(world.path("out/a.md")).unwrap();

    assert_eq!(
        edit(json!({"path": "/out/a.md", "old": "blue", "new": "green"}))
            .await
            .unwrap(),
        "edited /out/a.md: 1 replacement"
    );
    assert_eq!(on_disk(), "one fish\ntwo fish\nred fish\ngreen\n");

    assert_invalid(
        edit(json!({"path": "/out/a.md", "old": "purple", "new": "x"})).await,
        "`old` not found in /out/a.md",
    );
    assert_invalid(
        edit(json!({"path": "/out/a.md", "old": "fish", "new": "cat"})).await,
        "`old` occurs 3 times in /out/a.md; give more context or set replace_all",
    );
    assert_eq!(on_disk(), "one fish\ntwo fish\nred fish\ngreen\n");

    assert_eq!(
        edit(json!({"path": "/out/a.md", "old": "fish", "new": "cat", "replace_all": true}))
            .await
            .unwrap(),
        "edited /out/a.md: 3 replacements"
    );
    assert_eq!(on_disk(), "one cat\ntwo cat\nred cat\ngreen\n");

    for (args, expected) in [
        (
            json!({"path": "/out/a.md", "old": "", "new": "x"}),
            "must not be empty",
        ),
        (
            json!({"path": "/out/a.md", "old": "cat", "new": "cat"}),
            "the same",
        ),
        (
            json!({"path": "/out/a.md", "old": "cat"}),
            "give `old` and `new`",
        ),
        (json!({"path": "/out/a.md"}), "give `old` and `new`"),
        (
            json!({"path": "/out/a.md", "old": "a", "new": "b", "edits": [{"old": "c", "new": "d"}]}),
            "not both",
        ),
        (
            json!({"path": "/out/a.md", "edits": []}),
            "at least one edit",
        ),
        (
            json!({"path": "/out/a.md", "olds": "a", "new": "b"}),
            "unknown field",
        ),
    ] {
        assert_invalid(edit(args).await, expected);
    }
    assert_eq!(on_disk(), "one cat\ntwo cat\nred cat\ngreen\n");
}

#[tokio::test]
async fn edit_file_applies_a_list_of_edits_all_or_none() {
    let world = World::new();
    file(&world, "out/a.md", "alpha beta gamma beta\n", 0);
    let (registry, access) = world.load(READER, "main").await;
    let edit = |args: Value| call(&registry, &access, "edit_file", args);
    let on_disk = || std::fs::read_to_string(world.path("out/a.md")).unwrap();

    // The second edit fails: nothing is written, and the error names it.
    let failing = json!({"path": "/out/a.md", "edits": [
        {"old": "alpha", "new": "ALPHA"},
        {"old": "delta", "new": "DELTA"},
    ]});
    assert_invalid(
        edit(failing).await,
        "edits[1]: `old` not found in /out/a.md",
    );
    let ambiguous = json!({"path": "/out/a.md", "edits": [
        {"old": "alpha", "new": "ALPHA"},
        {"old": "beta", "new": "BETA"},
    ]});
    assert_invalid(edit(ambiguous).await, "edits[1]: `old` occurs 2 times");
    assert_eq!(on_disk(), "alpha beta gamma beta\n");

    // Later edits see earlier ones' results.
    let chained = json!({"path": "/out/a.md", "edits": [
        {"old": "beta", "new": "BETA", "replace_all": true},
        {"old": "alpha BETA", "new": "first"},
    ]});
    assert_eq!(
        edit(chained).await.unwrap(),
        "edited /out/a.md: 3 replacements in 2 edits"
    );
    assert_eq!(on_disk(), "first gamma BETA\n");
}

#[tokio::test]
async fn edit_file_through_a_read_only_grant_is_denied() {
    let world = World::new();
    let (registry, access) = world.load(READER, "main").await;
    let error = call(
        &registry,
        &access,
        "edit_file",
        json!({"path": "/docs/notes.md", "old": "alpha", "new": "ALPHA"}),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, ToolCallError::Failed { message, .. } if message.starts_with("denied:")),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(world.path("docs/notes.md")).unwrap(),
        "alpha\nthe quick brown fox\nomega\n"
    );
}
