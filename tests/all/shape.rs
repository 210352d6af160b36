//! The shape of the crate's source: no file of `host/src` over [`MAX_FILE_LINES`]
//! lines and no function over [`MAX_FN_LINES`], so that each file has one job and each
//! function reads as a list of named steps. A function is counted from its `fn` line to
//! its closing brace (methods, nested and async functions included); functions in a
//! `#[cfg(test)] mod` block are not counted, though its lines count toward its file's.

use std::path::{Path, PathBuf};

/// The most lines a source file may have.
const MAX_FILE_LINES: usize = 600;

/// The most lines a function may have, from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 80;

/// Functions allowed over [`MAX_FN_LINES`]: (file under `host/src`, function, why).
const LONG_FUNCTIONS: &[(&str, &str, &str)] = &[];

/// `source` with the text of comments, string, raw string and character literals
/// replaced by spaces (line breaks kept), so braces and `fn` in them are not seen.
pub(crate) fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = chars.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(chars.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let before = if i > 0 { chars[i - 1] } else { ' ' };
        let raw_start =
            c == 'r' && (!is_ident(before) || (before == 'b' && !is_ident(at(i.wrapping_sub(2)))));
        if c == '/' && at(i + 1) == '/' {
            let end = (i..chars.len())
                .find(|&j| chars[j] == '\n')
                .unwrap_or(chars.len());
            blank(&mut out, i, end);
            i = end;
        } else if c == '/' && at(i + 1) == '*' {
            let (mut depth, mut j) = (0, i);
            while j < chars.len() {
                if chars[j] == '/' && at(j + 1) == '*' {
                    depth += 1;
                    j += 2;
                } else if chars[j] == '*' && at(j + 1) == '/' {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if raw_start && (at(i + 1) == '"' || at(i + 1) == '#') {
            let hashes = (i + 1..chars.len())
                .take_while(|&j| chars[j] == '#')
                .count();
            if at(i + 1 + hashes) != '"' {
                i += 1; // a raw identifier, r#type
                continue;
            }
            let mut j = i + 2 + hashes;
            while j < chars.len() && !(chars[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#')) {
                j += 1;
            }
            blank(&mut out, i + 1, j + 1 + hashes);
            i = j + 1 + hashes;
        } else if c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c == '\'' && at(i + 1) == '\\' {
            let end = (i + 3..chars.len())
                .find(|&j| chars[j] == '\'')
                .unwrap_or(chars.len());
            blank(&mut out, i, end + 1);
            i = end + 1;
        } else if c == '\'' && at(i + 2) == '\'' {
            blank(&mut out, i, i + 3);
            i += 3;
        } else {
            i += 1; // code, or a lifetime's quote
        }
    }
    out.into_iter().collect()
}

/// The index of the brace that closes the one at `open` in `code`.
fn closing_brace(code: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, &c) in code.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// Where `word` stands as a whole word in `code`, each index.
fn words(code: &[char], word: &str) -> Vec<usize> {
    let word: Vec<char> = word.chars().collect();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    (0..code.len().saturating_sub(word.len() - 1))
        .filter(|&i| {
            code[i..i + word.len()] == word[..]
                && (i == 0 || !is_ident(code[i - 1]))
                && code.get(i + word.len()).is_none_or(|&c| !is_ident(c))
        })
        .collect()
}

/// One function with a body: its name, first line and length in lines.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// Every function with a body in `source`, outside `#[cfg(test)] mod` blocks.
fn functions(source: &str) -> Vec<Function> {
    let code: Vec<char> = code_only(source).chars().collect();
    let line_of = |at: usize| code[..at].iter().filter(|&&c| c == '\n').count() + 1;
    let test_blocks: Vec<(usize, usize)> = words(&code, "cfg")
        .into_iter()
        .filter_map(|at| {
            let rest: String = code[at..].iter().take(200).collect();
            let compact: String = rest.split_whitespace().collect();
            if !compact.starts_with("cfg(test)]mod") {
                return None;
            }
            let open = at + rest.find('{')?;
            // `mod tests;` (tests in their own file) has no block here.
            if rest[..open - at].contains(';') {
                return None;
            }
            Some((open, closing_brace(&code, open)?))
        })
        .collect();
    let mut found = Vec::new();
    for at in words(&code, "fn") {
        if test_blocks.iter().any(|&(from, to)| from < at && at < to) {
            continue;
        }
        let name: String = code[at + 2..]
            .iter()
            .skip_while(|c| c.is_whitespace())
            .take_while(|&&c| c.is_alphanumeric() || c == '_')
            .collect();
        if name.is_empty() {
            continue; // a `fn(..)` pointer type
        }
        // The body opens at the first `{` outside parentheses and brackets; a `;`
        // there first is a declaration without a body.
        let mut depth = 0i32;
        let mut open = None;
        for (j, &c) in code.iter().enumerate().skip(at) {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                ';' if depth == 0 => break,
                '{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                _ => {}
            }
        }
        let Some(close) = open.and_then(|open| closing_brace(&code, open)) else {
            continue;
        };
        let line = line_of(at);
        found.push(Function {
            name,
            line,
            lines: line_of(close) - line + 1,
        });
    }
    found
}

/// Every `.rs` file under `dir`, sorted.
pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn no_source_file_or_function_is_too_long() {
    let src = crate::support::root().join("host/src");
    let mut too_long = Vec::new();
    let mut excepted_seen = Vec::new();
    for file in rust_files(&src) {
        let relative = file.strip_prefix(&src).unwrap().display().to_string();
        let source = std::fs::read_to_string(&file).unwrap();
        let lines = source.lines().count();
        if lines > MAX_FILE_LINES {
            too_long.push(format!(
                "host/src/{relative}: {lines} lines (at most {MAX_FILE_LINES}; split it by job, tests into a sibling tests.rs)"
            ));
        }
        for function in functions(&source) {
            if function.lines <= MAX_FN_LINES {
                continue;
            }
            let excepted = LONG_FUNCTIONS
                .iter()
                .any(|(path, name, _)| *path == relative && *name == function.name);
            if excepted {
                excepted_seen.push((relative.clone(), function.name.clone()));
                continue;
            }
            too_long.push(format!(
                "host/src/{relative}:{}: fn {} is {} lines (at most {MAX_FN_LINES}; split it into named steps)",
                function.line, function.name, function.lines
            ));
        }
    }
    for (path, name, _) in LONG_FUNCTIONS {
        assert!(
            excepted_seen
                .iter()
                .any(|(p, n)| p == path && n == name),
            "LONG_FUNCTIONS names {path}: fn {name}, which is no longer over {MAX_FN_LINES} lines: remove it"
        );
    }
    assert!(too_long.is_empty(), "too long:\n{}", too_long.join("\n"));
}

#[test]
fn the_scanner_counts_functions_past_strings_comments_and_tests() {
    let source = r###"
fn short() {
    let s = "}}} fn fake() {";
    let r = r#"fn raw() { "# ;
    let c = '}';
    let e = '\'';
    let u = '\u{7d}';
    // fn commented() {
    /* } /* nested } */ fn x() { */
}
impl<'a> Thing<'a> {
    pub async fn method(&'a self, f: fn(u8) -> u8, a: [u8; 2]) -> Result<(), ()>
    where
        Self: Sized,
    {
        fn nested() {
        }
        Ok(())
    }
}
trait T {
    fn declared(&self);
}
#[cfg(test)]
mod tests {
    fn in_tests() {
    }
}
"###;
    let found = functions(source);
    let expected = [
        Function {
            name: "short".into(),
            line: 2,
            lines: 9,
        },
        Function {
            name: "method".into(),
            line: 12,
            lines: 8,
        },
        Function {
            name: "nested".into(),
            line: 16,
            lines: 2,
        },
    ];
    assert_eq!(found, expected);
}

/// Types a public field must not have: an embedder would hold the crate's channels,
/// cancellation tokens or locks, and could use them past the API (cancel a job without
/// its owner, read a watch the crate may change).
const HIDDEN_TYPES: &[&str] = &[
    "CancellationToken",
    "Sender",
    "Receiver",
    "Mutex",
    "RwLock",
    "Notify",
    "Semaphore",
];

#[test]
fn no_public_field_exposes_a_channel_a_token_or_a_lock() {
    let src = crate::support::root().join("host/src");
    let mut exposed = Vec::new();
    for file in rust_files(&src) {
        let source = std::fs::read_to_string(&file).unwrap();
        for (number, line) in source.lines().enumerate() {
            let Some(field) = line.trim_start().strip_prefix("pub ") else {
                continue;
            };
            let Some((name, ty)) = field.split_once(": ") else {
                continue;
            };
            let is_field = name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if is_field && HIDDEN_TYPES.iter().any(|hidden| ty.contains(hidden)) {
                exposed.push(format!(
                    "{}:{}: {}",
                    file.strip_prefix(&src).unwrap().display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        exposed.is_empty(),
        "public fields of hidden types (make them pub(crate) and offer a method):\n{}",
        exposed.join("\n")
    );
}
