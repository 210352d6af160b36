//! The documentation holds together: every relative link in the README and `docs/`
//! reaches a file of the repository and every `#anchor` a heading of its page, the
//! README stays short, and nothing a reader, a script or CI runs names a path outside
//! the repository.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The README's hard limit; the rest belongs in `docs/`.
const README_MAX_LINES: usize = 350;

/// Absolute paths of a particular machine: a path under one of these in the docs or a
/// script would work on that machine only.
const MACHINE_PATHS: &[&str] = &["/work/", "/tmp/", "/root/", "/mnt/", "/srv/", "/home/"];

/// The one machine path the docs may show: a placeholder user's home, in the MCP
/// clients' setup, where a config path has to be absolute.
const PLACEHOLDER_HOME: &str = "/home/me/";

/// The documentation pages whose links are checked, relative to `root`.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|entries| {
            entries
                .map(|entry| entry.unwrap().path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
                .map(|path| path.strip_prefix(root).unwrap().to_path_buf())
                .collect()
        })
        .unwrap_or_default();
    docs.sort();
    pages.extend(docs);
    for guide in ["plugins/README.md", "fuzz/README.md"] {
        if root.join(guide).is_file() {
            pages.push(PathBuf::from(guide));
        }
    }
    pages
}

/// `text` with fenced code blocks and inline code spans blanked out (newlines kept, so
/// offsets still give lines): links and headings are only looked for in prose.
fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<&str> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            _ => {}
        }
        if fence.is_some() || marker.is_some() {
            out.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
        } else {
            out.push_str(line);
        }
    }
    blank_code_spans(&out)
}

/// Blanks every inline code span: a run of backticks up to the next run as long.
fn blank_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<char> = chars.clone();
    let mut at = 0;
    while at < chars.len() {
        if chars[at] != '`' {
            at += 1;
            continue;
        }
        let run = chars[at..].iter().take_while(|&&c| c == '`').count();
        let body = at + run;
        let close = (body..chars.len()).find(|&i| {
            chars[i..].iter().take_while(|&&c| c == '`').count() == run
                && (i == 0 || chars[i - 1] != '`')
        });
        match close {
            Some(end) => {
                for c in &mut out[at..end + run] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                at = end + run;
            }
            None => at = body,
        }
    }
    out.into_iter().collect()
}

/// GitHub's anchor for a heading: lowercase, punctuation other than `-` and `_`
/// dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings; a repeated heading gets `-1`, `-2`, … as on GitHub.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut fence = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if fence || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..].replace('`', ""));
        let mut anchor = base.clone();
        let mut n = 0;
        while anchors.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        anchors.insert(anchor);
    }
    anchors
}

/// Every inline link target in `text`'s prose, with its line.
fn links(text: &str) -> Vec<(usize, String)> {
    let prose = prose(text);
    let mut links = Vec::new();
    let mut from = 0;
    while let Some(at) = prose[from..].find("](") {
        let start = from + at + 2;
        let Some(len) = prose[start..].find(')') else {
            break;
        };
        let target = prose[start..start + len].split_whitespace().next();
        let target = target.unwrap_or("").trim_matches(['<', '>']);
        links.push((prose[..start].matches('\n').count() + 1, target.to_string()));
        from = start + len;
    }
    links
}

/// `path` made lexically absolute under `root` (`..` applied); `None` when it leaves it.
fn inside(root: &Path, path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<Component<'_>> = Vec::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            Component::Normal(_) => parts.push(part),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(root.join(parts.iter().collect::<PathBuf>()))
}

/// What is wrong with the links of the pages under `root`, one line each.
fn broken_links(root: &Path) -> Vec<String> {
    let mut broken = Vec::new();
    for page in pages(root) {
        let text = std::fs::read_to_string(root.join(&page)).unwrap();
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let at = format!("{}:{line}: ({target})", page.display());
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let dest = if file.is_empty() {
                Some(root.join(&page))
            } else {
                inside(root, &page.parent().unwrap().join(file))
            };
            let Some(dest) = dest else {
                broken.push(format!("{at} leaves the repository"));
                continue;
            };
            if !dest.exists() {
                broken.push(format!("{at} names no file"));
            } else if !anchor.is_empty() {
                let Ok(text) = std::fs::read_to_string(&dest) else {
                    broken.push(format!("{at} has an anchor on a page that is not text"));
                    continue;
                };
                if !anchors(&text).contains(anchor) {
                    broken.push(format!("{at} names no heading of its page"));
                }
            }
        }
    }
    broken
}

/// Every file under `dir`, recursively; build output, installed packages and hidden
/// directories (a demo's `.warren/runs` journal, written as it runs) skipped.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        let skipped = name.starts_with('.') || matches!(&*name, "target" | "node_modules");
        if path.is_dir() && !skipped {
            files_under(&path, out);
        } else if path.is_file() {
            out.push(path);
        }
    }
}

fn is_path_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '~' | '$')
}

/// Each place in the README, `docs/`, `scripts/`, `examples/`, `bench/` and `.ci/` under `root`
/// that names a path outside the repository: a machine path (`/work/…`), or a `../`
/// path that names nothing of the repository from the file's own directory and does
/// not start from one of its top-level names either (`../../target/debug/warren`, run
/// from `examples/quickstart`, is the repository's own build).
fn outside_paths(root: &Path) -> Vec<String> {
    let mut files = vec![root.join("README.md")];
    for dir in ["docs", "scripts", "examples", "bench", ".ci"] {
        files_under(&root.join(dir), &mut files);
    }
    files.sort();
    let top_level: BTreeSet<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .chain(["target".to_string()])
        .collect();
    let mut found = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let rel = file.strip_prefix(root).unwrap();
        for (number, line) in text.lines().enumerate() {
            let at = format!("{}:{}", rel.display(), number + 1);
            for (i, _) in line.char_indices() {
                let before = line[..i].chars().last();
                let rest = &line[i..];
                if before.is_some_and(|c| is_path_char(c) && c != '/') {
                    continue;
                }
                if let Some(prefix) = MACHINE_PATHS.iter().find(|p| rest.starts_with(**p)) {
                    if !rest.starts_with(PLACEHOLDER_HOME) && before != Some('/') {
                        found.push(format!("{at}: names {prefix}…"));
                    }
                }
                if rest.starts_with("../") && !line[..i].ends_with("../") {
                    let path: String = rest.chars().take_while(|&c| is_path_char(c)).collect();
                    let from = rel.parent().unwrap();
                    let exists = inside(root, &from.join(&path)).is_some_and(|p| p.exists());
                    let first = path.split('/').find(|s| !s.is_empty() && *s != "..");
                    if !exists && !first.is_some_and(|name| top_level.contains(name)) {
                        found.push(format!("{at}: {path} is not in the repository"));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn every_link_in_the_docs_resolves() {
    let broken = broken_links(&crate::support::root());
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_stays_short() {
    let readme = std::fs::read_to_string(crate::support::root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move material to docs/"
    );
}

#[test]
fn nothing_names_a_path_outside_the_repository() {
    let found = outside_paths(&crate::support::root());
    assert!(
        found.is_empty(),
        "paths outside the repository:\n{}",
        found.join("\n")
    );
}

/// The checks above on a small repository made to fail each of them: a test that
/// passes on the real one proves little unless the same code sees these.
#[test]
fn the_checks_find_broken_links_and_outside_paths() {
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    for dir in ["docs", "scripts", "wit"] {
        std::fs::create_dir(root.join(dir)).unwrap();
    }
    std::fs::write(root.join("wit/plugin.wit"), "").unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Title\n\nSee [the guide](docs/guide.md#a-typed-component) and [gone](docs/gone.md),\n\
         [a split\nlink](docs/guide.md#nowhere) and [up](../shared/x.md).\n\
         `[in code](docs/gone.md)`, [the WIT](wit/plugin.wit), [here](#title).\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/guide.md"),
        "# Guide\n\n## A `typed` component\n\n```\n## Not a heading\n```\n\
         [up](../wit/plugin.wit) [fenced](#not-a-heading)\n\
         Run `../shared/bench/run.sh` or /work/shared/x; config at /home/me/project.\n",
    )
    .unwrap();
    std::fs::write(
        root.join("scripts/bench"),
        "here=$(dirname \"$0\")/../../shared/bench\ncd \"$(dirname \"$0\")/..\"\nls /tmp/x\n",
    )
    .unwrap();

    let broken = broken_links(root);
    let expected = [
        "README.md:3: (docs/gone.md) names no file",
        "README.md:5: (docs/guide.md#nowhere) names no heading of its page",
        "README.md:5: (../shared/x.md) leaves the repository",
        "docs/guide.md:8: (#not-a-heading) names no heading of its page",
    ];
    assert_eq!(broken, expected, "{broken:#?}");

    let found = outside_paths(root);
    assert_eq!(
        found,
        [
            "README.md:5: ../shared/x.md is not in the repository",
            "docs/guide.md:9: ../shared/bench/run.sh is not in the repository",
            "docs/guide.md:9: names /work/…",
            "scripts/bench:1: ../../shared/bench is not in the repository",
            "scripts/bench:3: names /tmp/…",
        ],
        "{found:#?}"
    );
}
