//! `glob` and `grep`: matching, ordering, output modes, filters, limits, and never a
//! path outside the grants.

use serde_json::{json, Value};
use warren::ToolCallError;

use super::{assert_invalid, call, file, READER};
use crate::support::World;

#[tokio::test]
async fn glob_finds_files_across_grants_newest_first() {
    let world = World::new();
    file(&world, "docs/notes.md", "alpha\n", 300);
    file(&world, "docs/sub/deep.txt", "a fox\n", 50);
    file(&world, "docs/sub/b.md", "b\n", 100);
    file(&world, "docs/sub/deeper/c.md", "c\n", 200);
    file(&world, "out/d.md", "d\n", 10);
    let (registry, access) = world.load(READER, "main").await;
    let glob = |args: Value| call(&registry, &access, "glob", args);

    assert_eq!(
        glob(json!({"pattern": "**/*.md"})).await.unwrap(),
        "/out/d.md\n/docs/sub/b.md\n/docs/sub/deeper/c.md\n/docs/notes.md"
    );
    assert_eq!(
        glob(json!({"pattern": "*.md", "path": "/docs"}))
            .await
            .unwrap(),
        "/docs/notes.md",
        "`*` stays within one directory"
    );
    assert_eq!(
        glob(json!({"pattern": "**/*.md", "path": "/docs/sub/"}))
            .await
            .unwrap(),
        "/docs/sub/b.md\n/docs/sub/deeper/c.md"
    );
    assert_eq!(
        glob(json!({"pattern": "/docs/**/c.*"})).await.unwrap(),
        "/docs/sub/deeper/c.md"
    );
    assert_eq!(
        glob(json!({"pattern": "**/*.{md,txt}", "limit": 2}))
            .await
            .unwrap(),
        "/out/d.md\n/docs/sub/deep.txt\n[and 3 more]"
    );
    assert_eq!(
        glob(json!({"pattern": "**/*.rs"})).await.unwrap(),
        "no files match **/*.rs under /docs, /out"
    );
    assert_invalid(glob(json!({"pattern": "a[b"})).await, "bad glob pattern");
    assert_invalid(glob(json!({"pattern": "*", "limit": 0})).await, "limit");
    assert_invalid(
        glob(json!({"pattern": "*", "depth": 1})).await,
        "unknown field",
    );
}

/// Notes, story and deep: three files with `fox`, oldest to newest: notes, deep, story.
fn grep_world() -> World {
    let world = World::new();
    file(
        &world,
        "docs/notes.md",
        "alpha\nthe quick brown fox\nomega\n",
        300,
    );
    file(
        &world,
        "docs/sub/deep.txt",
        "a fox in a subdirectory\n",
        200,
    );
    file(
        &world,
        "docs/story.md",
        "one\nfox two\nthree\nfour\nfive\nsix\nFox seven\neight\n",
        100,
    );
    world
}

#[tokio::test]
async fn grep_lists_files_lines_or_counts() {
    let world = grep_world();
    let (registry, access) = world.load(READER, "main").await;
    let grep = |args: Value| call(&registry, &access, "grep", args);

    assert_eq!(
        grep(json!({"pattern": "fox"})).await.unwrap(),
        "/docs/story.md\n/docs/sub/deep.txt\n/docs/notes.md",
        "files with matches, newest first"
    );
    assert_eq!(
        grep(json!({"pattern": "f.x", "output_mode": "content", "path": "/docs"}))
            .await
            .unwrap(),
        "/docs/notes.md:2:the quick brown fox\n/docs/story.md:2:fox two\n/docs/sub/deep.txt:1:a fox in a subdirectory"
    );
    assert_eq!(
        grep(json!({"pattern": "FOX", "case_insensitive": true, "output_mode": "count"}))
            .await
            .unwrap(),
        "/docs/notes.md:1\n/docs/story.md:2\n/docs/sub/deep.txt:1"
    );
    assert_eq!(
        grep(json!({"pattern": "^fox", "output_mode": "count"}))
            .await
            .unwrap(),
        "/docs/story.md:1",
        "anchors match at line starts"
    );
    assert_eq!(
        grep(json!({"pattern": "wolf"})).await.unwrap(),
        "no matches for wolf under /docs, /out"
    );
}

#[tokio::test]
async fn grep_shows_context_like_ripgrep() {
    let world = grep_world();
    let (registry, access) = world.load(READER, "main").await;
    let grep = |args: Value| call(&registry, &access, "grep", args);

    assert_eq!(
        grep(
            json!({"pattern": "fox", "path": "/docs/story.md", "case_insensitive": true,
                    "output_mode": "content", "context": 1})
        )
        .await
        .unwrap(),
        "/docs/story.md-1-one\n/docs/story.md:2:fox two\n/docs/story.md-3-three\n--\n\
         /docs/story.md-6-six\n/docs/story.md:7:Fox seven\n/docs/story.md-8-eight"
    );
    assert_eq!(
        grep(json!({"pattern": "fox", "path": "/docs/story.md", "case_insensitive": true,
                    "output_mode": "content", "before": 4}))
        .await
        .unwrap(),
        "/docs/story.md-1-one\n/docs/story.md:2:fox two\n/docs/story.md-3-three\n\
         /docs/story.md-4-four\n/docs/story.md-5-five\n/docs/story.md-6-six\n/docs/story.md:7:Fox seven",
        "groups that touch are not separated"
    );
    assert_eq!(
        grep(json!({"pattern": "fox", "path": "/docs", "output_mode": "content", "after": 1}))
            .await
            .unwrap(),
        "/docs/notes.md:2:the quick brown fox\n/docs/notes.md-3-omega\n--\n\
         /docs/story.md:2:fox two\n/docs/story.md-3-three\n--\n/docs/sub/deep.txt:1:a fox in a subdirectory",
        "groups in different files are separated too"
    );
}

#[tokio::test]
async fn grep_filters_limits_and_rejects_bad_input() {
    let world = grep_world();
    std::fs::write(world.path("docs/binary.md"), b"fox\0fox\n").unwrap();
    std::fs::write(world.path("docs/latin1.md"), b"fox \xe9t\xe9\n").unwrap();
    let (registry, access) = world.load(READER, "main").await;
    let grep = |args: Value| call(&registry, &access, "grep", args);

    assert_eq!(
        grep(json!({"pattern": "fox", "glob": "*.txt"}))
            .await
            .unwrap(),
        "/docs/sub/deep.txt"
    );
    assert_eq!(
        grep(json!({"pattern": "fox", "glob": "sub/**", "path": "/docs"}))
            .await
            .unwrap(),
        "/docs/sub/deep.txt"
    );
    assert_eq!(
        grep(json!({"pattern": "fox", "type": "md", "output_mode": "count"}))
            .await
            .unwrap(),
        "/docs/notes.md:1\n/docs/story.md:1",
        "binary and non-UTF-8 files are skipped"
    );
    assert_eq!(
        grep(json!({"pattern": "fox", "output_mode": "content", "limit": 1}))
            .await
            .unwrap(),
        "/docs/notes.md:2:the quick brown fox\n[cut: 2 more lines]"
    );
    assert_invalid(grep(json!({"pattern": "fox("})).await, "bad regex");
    assert_invalid(
        grep(json!({"pattern": "fox", "type": "cobol"})).await,
        "unknown type `cobol`; known types: rs, py, js, ts",
    );
    assert_invalid(
        grep(json!({"pattern": "fox", "output_mode": "lines"})).await,
        "unknown variant",
    );
    assert_invalid(
        grep(json!({"pattern": "fox", "limit": 5001})).await,
        "limit",
    );
    assert_invalid(
        grep(json!({"pattern": "fox", "context": 101})).await,
        "at most",
    );
    assert_invalid(grep(json!({"pattern": "a{1000}{1000}"})).await, "bad regex");
}

#[tokio::test]
async fn search_tools_stay_inside_the_grants() {
    let world = World::new();
    std::os::unix::fs::symlink(world.path("secret.txt"), world.path("docs/leak.txt")).unwrap();
    std::os::unix::fs::symlink(world.dir.path(), world.path("docs/up")).unwrap();
    let (registry, access) = world.load(READER, "main").await;
    let host_dir = world.dir.path().display().to_string();

    for tool in ["glob", "grep"] {
        for path in [
            "/",
            "/etc",
            "/docs/..",
            "/docs/../secret.txt",
            &host_dir,
            "/nowhere",
        ] {
            let pattern = if tool == "glob" { "**/*" } else { "SECRET" };
            let error = call(
                &registry,
                &access,
                tool,
                json!({"pattern": pattern, "path": path}),
            )
            .await
            .expect_err(&format!("{tool} {path}"));
            let ToolCallError::Failed { message, .. } = &error else {
                panic!("{tool} {path}: {error}")
            };
            assert!(message.starts_with("denied: "), "{tool} {path}: {message}");
            assert!(!message.contains("TOP SECRET"), "{message}");
        }
    }
    let error = call(
        &registry,
        &access,
        "grep",
        json!({"pattern": "x", "path": "/"}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "grep failed: denied: / is outside the granted directories: /docs (read-only), /out"
    );
    let error = call(
        &registry,
        &access,
        "glob",
        json!({"pattern": "*", "path": "/docs/nope"}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "glob failed: /docs/nope: no such file or directory"
    );
    let everything = call(&registry, &access, "glob", json!({"pattern": "**/*"}))
        .await
        .unwrap();
    assert!(
        !everything.contains("secret") && !everything.contains("leak"),
        "{everything}"
    );
    assert_eq!(
        call(&registry, &access, "grep", json!({"pattern": "SECRET"}))
            .await
            .unwrap(),
        "no matches for SECRET under /docs, /out"
    );

    let (registry, access) = world.load("[profiles.main]\n", "main").await;
    let error = call(&registry, &access, "glob", json!({"pattern": "**/*"}))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("denied: this profile grants no directories"),
        "{error}"
    );
}
